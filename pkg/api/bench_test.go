package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/api"
	"lockstep/pkg/router"
)

// newServer builds a config-only server (no database) serving the given deployments.
func newServer(t testing.TB, deployments map[string]*router.Deployment) *api.Server {
	b := setup(t)
	b.models.SetConfig(deployments)
	return b.srv
}

func deployment(t testing.TB, id, name, params string) *router.Deployment {
	d, err := router.Build(id, name, []byte(params), nil)
	require.NoError(t, err)
	return d
}

func benchChat(b *testing.B, srv *api.Server, body []byte) {
	h := srv.Handler()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-master")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkChatMock: the gateway's own overhead (auth, route, mock answer), no network.
func BenchmarkChatMock(b *testing.B) {
	srv := newServer(b, map[string]*router.Deployment{"m1": deployment(b, "m1", "mock", `{"model":"openai/x","mock_response":"hello"}`)})
	benchChat(b, srv, []byte(`{"model":"mock","messages":[{"role":"user","content":"hi"}]}`))
}

// BenchmarkChatPassthrough: a 4 KB chat request passed through to a (fake) OpenAI upstream
// over loopback HTTP, the body edited in place (model name only).
func BenchmarkChatPassthrough(b *testing.B) {
	up := fakeupstream.Start(b)
	srv := newServer(b, map[string]*router.Deployment{"u1": deployment(b, "u1", "up", fmt.Sprintf(`{"model":"openai/gpt-up","api_base":%q,"api_key":"k"}`, up.URL+"/v1"))})
	msg := bytes.Repeat([]byte("lorem ipsum "), 340)
	benchChat(b, srv, []byte(fmt.Sprintf(`{"model":"up","messages":[{"role":"user","content":%q}]}`, msg)))
}
