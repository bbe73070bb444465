package provider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"lockstep/pkg/format"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/provider"
)

// The upstream call skips http.Client on the hot path; what the client did must still happen
// where wanted: an api_base user:password goes as basic auth, and a transport failure reads as
// before (Post "<url>": <cause>). A redirect is not followed (API.md "Security rules"): a 502
// naming the status, and nothing reaches the redirect's target.
func TestUpstreamCallClientBehaviour(t *testing.T) {
	t.Parallel()
	chat := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"moved ok"},"finish_reason":"stop"}]}`
	var gotBody, gotUser, gotPass string
	var redirected atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/old/chat/completions":
			http.Redirect(w, r, "/moved/chat/completions", http.StatusTemporaryRedirect)
		case "/moved/chat/completions":
			redirected.Add(1)
		case "/v1/chat/completions":
			b, _ := io.ReadAll(r.Body)
			gotBody = string(b)
			gotUser, gotPass, _ = r.BasicAuth()
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, chat)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	body := []byte(`{"model":"g","messages":[{"role":"user","content":"hi"}]}`)
	call := func(base string) (*provider.Response, error) {
		// no api_key: an api_base user:password is sent as basic auth only when no other
		// Authorization is
		d, err := provider.NewDeployment("id", "g", []byte(fmt.Sprintf(`{"model":"openai/m","api_base":%q}`, base)))
		require.NoError(t, err)
		return provider.NewClient().Do(context.Background(), d, format.FormatChat, body)
	}

	for _, base := range []string{srv.URL + "/old", "http://bob:pw0123456@" + srv.Listener.Addr().String() + "/old"} {
		_, err := call(base)
		var ue *format.UpstreamError
		require.ErrorAs(t, err, &ue)
		require.Equal(t, 502, ue.Status)
		require.Contains(t, ue.Message, "upstream answered 307 Temporary Redirect")
		require.ErrorContains(t, err, provider.ErrRedirect.Error())
		require.Zero(t, redirected.Load(), "the redirect is not followed")
	}

	res, err := call("http://alice:s3cret@" + srv.Listener.Addr().String() + "/v1")
	require.NoError(t, err)
	require.Equal(t, "moved ok", res.Text())
	require.Contains(t, gotBody, `"messages":[{"role":"user","content":"hi"}]`)
	require.Equal(t, "alice/s3cret", gotUser+"/"+gotPass)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens: connection refused
	_, err = call("http://" + addr + "/v1")
	var ue *format.UpstreamError
	require.True(t, errors.As(err, &ue), "%v", err)
	require.Equal(t, 502, ue.Status)
	require.Contains(t, ue.Message, fmt.Sprintf(`upstream call failed: Post "http://%s/v1/chat/completions": dial tcp %s:`, addr, addr))
}
