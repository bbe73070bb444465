package itest

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 17 input 8, the same kind of leak in another shape: an api_base with a password
// ("http://user:pass@proxy/") on a deployment whose key travels in its own header (Anthropic's
// x-api-key) makes net/http send "Authorization: Basic base64(user:pass)". /model/info masks
// the password, but an upstream 401 that echoes its request headers showed the Basic
// credential, which decodes to it, to any key allowed the model, and /health showed it to the
// admin. Now it is redacted as the password is, on both replicas.
func TestBasicCredentialOfAPIBaseRedacted(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithStatus(401), fakeupstream.WithEchoHeaders(), fakeupstream.WithErrorMessage("Unauthorized"))
	p := StartPair(t, GatewayOpts{})
	const pass = "proxy-pass-0123456789"
	basic := base64.StdEncoding.EncodeToString([]byte("gw:" + pass))
	createModel(t, p.A, "via-proxy", map[string]any{"model": "anthropic/claude-x",
		"api_base": "http://gw:" + pass + "@" + up.URL[len("http://"):], "api_key": "sk-ant-proxy-0123456789"})
	key := bodyKey(t, p.A, "via-proxy")
	noSecret := func(what string, b []byte) {
		t.Helper()
		require.NotContains(t, string(b), pass, "%s: %s", what, b)
		require.NotContains(t, string(b), basic[:16], "%s: %s", what, b)
	}
	for _, g := range []*Gateway{p.A, p.B} {
		for _, path := range []string{"/v1/messages", "/v1/chat/completions"} {
			for _, stream := range []bool{false, true} {
				st, b := g.DoKey(t, key, "POST", path, map[string]any{"model": "via-proxy", "max_tokens": 8, "stream": stream,
					"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
				require.Equal(t, 401, st, "%s", b)
				require.Contains(t, string(b), "Authorization: Basic ", "the upstream echoed the Basic credential")
				noSecret(path, b)
			}
		}
	}
	r, ok := up.LastRequest("/v1/messages")
	require.True(t, ok)
	require.Equal(t, "Basic "+basic, r.Header.Get("Authorization"), "the credential was sent")
	st, b := p.A.Do(t, "GET", "/health?model=via-proxy", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, int64(1), gjson.GetBytes(b, "unhealthy_count").Int(), "%s", b)
	noSecret("/health", b)
	noSecret("log of a", []byte(p.A.Log()))
	noSecret("log of b", []byte(p.B.Log()))
}
