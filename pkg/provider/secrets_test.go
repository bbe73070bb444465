package provider_test

import (
	"context"
	"fmt"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/provider"
)

func TestMaskParamsURLPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"api_base":"http://u:URLPASS@host/v1"}`, `{"api_base":"http://u:****@host/v1"}`},
		{`{"api_base":"https://user:p%40ss@h:8443"}`, `{"api_base":"https://user:****@h:8443"}`},
		{`{"api_base":"https://a:b@c@h/x?q=1"}`, `{"api_base":"https://a:****@h/x?q=1"}`},
		// any string value, at any depth
		{`{"fallbacks":[{"base":"postgres://db:hunter22@pg/x"}]}`, `{"fallbacks":[{"base":"postgres://db:****@pg/x"}]}`},
		// no password, empty password, not a URL: kept
		{`{"api_base":"http://u@host/v1","b":"http://u:@h","c":"a:b@c","d":"http://h/p:q@r"}`, `{"api_base":"http://u@host/v1","b":"http://u:@h","c":"a:b@c","d":"http://h/p:q@r"}`},
		// a sensitive key masks the whole value
		{`{"auth_url":"http://u:pw@host/v1"}`, `{"auth_url":"ht****t/v1"}`},
	} {
		require.Equal(t, tc.want, string(provider.MaskParams([]byte(tc.in))), tc.in)
	}
}

func TestMaskParamsExcept(t *testing.T) {
	t.Parallel()
	in := `{"blocked_words":[{"keyword":"internal-codename"}],"keyword_redaction_tag":"[X]","api_key":"sk-abcdefghijkl"}`
	want := `{"blocked_words":[{"keyword":"internal-codename"}],"keyword_redaction_tag":"[X]","api_key":"sk****ijkl"}`
	require.Equal(t, want, string(provider.MaskParamsExcept([]byte(in), "blocked_words", "keyword_redaction_tag")))
}

// Sending back what /model/info showed keeps the stored secret (LiteLLM's
// /model/update behaviour); a new value replaces it.
func TestRestoreMaskedSecrets(t *testing.T) {
	t.Parallel()
	stored := []byte(`{"model":"openai/x","api_key":"sk-real-123456","api_base":"http://u:URLPASS@host/v1",` +
		`"extra_headers":{"Authorization":"Bearer abcdefghijklmnop"},"list":[{"token":"short"}],"aws_secret":"os.environ/S"}`)
	masked := provider.MaskParams(stored)
	require.Equal(t, `{"model":"openai/x","api_key":"sk****3456","api_base":"http://u:****@host/v1",`+
		`"extra_headers":{"Authorization":"Be****mnop"},"list":[{"token":"****"}],"aws_secret":"os.environ/S"}`, string(masked))

	// the whole masked object sent back: every secret restored, byte for byte
	require.Equal(t, string(stored), string(provider.RestoreMaskedSecrets(masked, stored)))

	// a partial write in another key order
	got := provider.RestoreMaskedSecrets([]byte(`{"api_base":"http://u:****@host/v1", "api_key":"sk****3456", "rpm":5}`), stored)
	require.Equal(t, `{"api_base":"http://u:URLPASS@host/v1", "api_key":"sk-real-123456", "rpm":5}`, string(got))

	// new values are taken as sent; so is a mask that does not match the stored secret
	for _, in := range []string{
		`{"api_key":"sk-new-999999999"}`,
		`{"api_key":"sk****9999"}`,
		`{"api_base":"http://u:****@other/v1"}`,
		`{"model":"openai/x"}`,
		`{"list":{"token":"****"}}`, // shape differs from the stored one
	} {
		require.Equal(t, in, string(provider.RestoreMaskedSecrets([]byte(in), stored)), in)
	}
	// invalid input is returned as is
	require.Equal(t, `{"api_key":`, string(provider.RestoreMaskedSecrets([]byte(`{"api_key":`), stored)))
	require.Equal(t, `{"api_key":"****"}`, string(provider.RestoreMaskedSecrets([]byte(`{"api_key":"****"}`), nil)))

	// keep: members masked by neither side are not touched
	g := []byte(`{"blocked_words":[{"keyword":"****"}],"api_key":"sk****ijkl"}`)
	gs := []byte(`{"blocked_words":[{"keyword":"secretword"}],"api_key":"sk-abcdefghijkl"}`)
	require.Equal(t, `{"blocked_words":[{"keyword":"****"}],"api_key":"sk-abcdefghijkl"}`,
		string(provider.RestoreMaskedSecrets(g, gs, "blocked_words")))
}

// An upstream that echoes the key it was sent (OpenAI's 401 "Incorrect API key provided: ...")
// must not hand it to the gateway's callers: the deployment's API key and api_base password are
// redacted from the error's Message and Body, before and during a stream.
func TestUpstreamErrorRedactsSecrets(t *testing.T) {
	t.Parallel()
	const key = "sk-REALKEY-0123456789"
	const pass = "URLPASS"
	echo := func(w http.ResponseWriter, r *http.Request) string {
		u, p, _ := r.BasicAuth()
		return fmt.Sprintf("Incorrect API key provided: %s (auth header %q, basic %s:%s)", key, r.Header.Get("Authorization"), u, p)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "midstream") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
			fmt.Fprintf(w, "data: {\"error\":{\"message\":%q}}\n\n", echo(w, r))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, echo(w, r))
	}))
	t.Cleanup(srv.Close)
	base := "http://u:" + pass + "@" + srv.Listener.Addr().String() + "/v1"
	d, err := provider.NewDeployment("id", "g", []byte(fmt.Sprintf(`{"model":"openai/m","api_key":%q,"api_base":%q}`, key, base)))
	require.NoError(t, err)
	require.Equal(t, "key sk****6789 base ****", d.Redact("key "+key+" base "+pass))

	noSecret := func(t *testing.T, s string) {
		t.Helper()
		require.NotContains(t, s, key)
		require.NotContains(t, s, "REALKEY")
		require.NotContains(t, s, pass)
	}
	c := provider.NewClient()
	ctx := context.Background()
	chat := []byte(`{"model":"g","messages":[{"role":"user","content":"x"}]}`)

	_, err = c.Do(ctx, d, format.FormatChat, chat)
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 401, ue.Status)
	require.Contains(t, ue.Message, "Incorrect API key provided: sk****6789")
	noSecret(t, ue.Message)
	noSecret(t, string(ue.Body))
	noSecret(t, err.Error())

	// translated (messages → chat) and streamed: refused before the first event
	_, err = c.Stream(ctx, d, format.FormatMessages, []byte(`{"model":"g","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"x"}]}`))
	require.ErrorAs(t, err, &ue)
	noSecret(t, ue.Message)
	noSecret(t, string(ue.Body))

	// an error event in the middle of a passthrough stream
	st, err := c.Stream(ctx, d, format.FormatChat, []byte(`{"model":"g","stream":true,"messages":[{"role":"user","content":"midstream"}]}`))
	require.NoError(t, err)
	defer st.Close()
	var all []byte
	for {
		ev, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			noSecret(t, err.Error())
			break
		}
		all = append(all, ev.Data...)
	}
	require.Contains(t, string(all), "Incorrect API key provided: sk****6789")
	noSecret(t, string(all))

	// a transport failure names the URL: its password is not in the message either
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	d, err = provider.NewDeployment("id", "g", []byte(fmt.Sprintf(`{"model":"openai/m","api_key":%q,"api_base":%q}`,
		key, "http://u:"+pass+"@"+dead.Listener.Addr().String()+"/v1")))
	require.NoError(t, err)
	_, err = c.Do(ctx, d, format.FormatChat, chat)
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 502, ue.Status)
	noSecret(t, ue.Message)
}
