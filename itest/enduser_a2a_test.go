package itest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// postAs sends body (JSON) to path on g with key and extra headers; returns status, headers
// and body.
func postAs(t *testing.T, g *Gateway, key, path string, body any, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", g.URL+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

// The end user may be named by a header (x-litellm-customer-id, x-litellm-end-user-id) or a
// body field ("user", litellm_metadata.user, metadata.user_id, safety_identifier), first match
// wins as LiteLLM looks: its rpm_limit then holds across three replicas for calls naming it by
// header, a blocked end user named only by metadata.user_id (the Anthropic messages field) is
// refused, a header wins over the body's "user", and the spend logs carry the end user.
func TestEndUserFromHeadersAndMetadata(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=1h")
	a := c.G[0]
	govMockModel(t, a, "euh-m", nil)
	st, body := a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "cust-h", "rpm_limit": 2})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "cust-blocked", "blocked": true})
	require.Equal(t, 200, st, "%s", body)
	for _, g := range c.G {
		Eventually(t, g.ReplicaID+" holds the end users", func() bool {
			return g.SyncLag(t)["registries"].(map[string]any)["end_users"].(map[string]any)["count"].(float64) == 2
		})
	}
	key := agGenKey(t, a)
	chat := map[string]any{"model": "euh-m", "messages": []map[string]any{{"role": "user", "content": "hi"}}}

	admitted := countAdmitted(t, 9, "Rate limit exceeded for end_user: cust-h. Limit type: requests. Current limit: 2", func(i int) (int, http.Header, []byte) {
		st, _, b := postAs(t, c.G[i%3], key, "/v1/chat/completions", chat, map[string]string{"x-litellm-end-user-id": "cust-h"})
		return st, nil, b
	})
	require.LessOrEqual(t, admitted, 2, "never more than the end user's rpm_limit across the replicas")
	require.GreaterOrEqual(t, admitted, 1)
	// the same end user named by x-litellm-customer-id, or by the body's "user", is the same limit
	st, _, body = postAs(t, c.G[1], key, "/v1/chat/completions", chat, map[string]string{"x-litellm-customer-id": "cust-h"})
	require.Equal(t, 429, st, "%s", body)
	withUser := map[string]any{"model": "euh-m", "user": "cust-h", "messages": chat["messages"]}
	st, _, body = postAs(t, c.G[2], key, "/v1/chat/completions", withUser, nil)
	require.Equal(t, 429, st, "%s", body)
	// a header wins over the body: the body names an unlimited end user, the header the limited one
	withOther := map[string]any{"model": "euh-m", "user": "cust-free", "messages": chat["messages"]}
	st, _, body = postAs(t, c.G[0], key, "/v1/chat/completions", withOther, map[string]string{"x-litellm-end-user-id": "cust-h"})
	require.Equal(t, 429, st, "%s", body)
	st, _, body = postAs(t, c.G[0], key, "/v1/chat/completions", withOther, nil)
	require.Equal(t, 200, st, "%s", body)

	// a blocked end user named by metadata.user_id on /v1/messages, by litellm_metadata.user
	// and by safety_identifier
	msgs := map[string]any{"model": "euh-m", "max_tokens": 16, "metadata": map[string]any{"user_id": "cust-blocked"},
		"messages": []map[string]any{{"role": "user", "content": "hi"}}}
	st, _, body = postAs(t, c.G[1], key, "/v1/messages", msgs, nil)
	require.Equal(t, 403, st, "%s", body)
	require.Contains(t, string(body), "End user cust-blocked is blocked.")
	for _, field := range []map[string]any{{"litellm_metadata": map[string]any{"user": "cust-blocked"}}, {"safety_identifier": "cust-blocked"}} {
		req := map[string]any{"model": "euh-m", "messages": chat["messages"]}
		for k, v := range field {
			req[k] = v
		}
		st, _, body = postAs(t, c.G[2], key, "/v1/chat/completions", req, nil)
		require.Equal(t, 403, st, "%v: %s", field, body)
	}

	// the spend logs name the end user given by header
	Eventually(t, "spend logs carry the header's end user", func() bool {
		return agScalar[int64](t, c.DB, "SELECT count(*) FROM gateway.spend_logs WHERE end_user = 'cust-h'") == int64(admitted)
	})
}

// A2A responses to a limited key carry the rate-limit headers as the LLM routes' do:
// message/send the values after its admission, message/stream (whose header goes out with
// its first event) the values before the call; a refusal carries Retry-After.
func TestA2ARateLimitHeaders(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{Env: []string{"GATEWAY_LIMIT_WINDOW=1h"}})
	createAgent(t, b.A, "rl-agent", map[string]any{"model": "m"})
	key, _ := govKey(t, b.A, map[string]any{"rpm_limit": 3, "tpm_limit": 100000})

	st, h, body := postAs(t, b.B, key, "/a2a/rl-agent", sendRequest("r1", "hello"), nil)
	require.Equal(t, 200, st, "%s", body)
	require.Contains(t, string(body), `"result"`, "%s", body)
	require.Equal(t, "3", h.Get("x-ratelimit-limit-requests"))
	require.Equal(t, "2", h.Get("x-ratelimit-remaining-requests"), "after this call's admission")
	require.Equal(t, "100000", h.Get("x-ratelimit-limit-tokens"))
	require.NotEmpty(t, h.Get("x-ratelimit-remaining-tokens"))

	stream := sendRequest("r2", "hello")
	stream["method"] = "message/stream"
	st, h, body = postAs(t, b.B, key, "/a2a/rl-agent", stream, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Contains(t, h.Get("Content-Type"), "text/event-stream")
	require.Equal(t, "3", h.Get("x-ratelimit-limit-requests"))
	require.Equal(t, "2", h.Get("x-ratelimit-remaining-requests"), "before this call")
	require.Contains(t, string(body), `"final":true`, "%s", body)

	st, h, body = postAs(t, b.B, key, "/a2a/rl-agent", sendRequest("r3", "hello"), nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "0", h.Get("x-ratelimit-remaining-requests"))
	// the fourth call in the window is refused, with the headers and Retry-After
	st, h, body = postAs(t, b.B, key, "/a2a/rl-agent", sendRequest("r4", "hello"), nil)
	require.Contains(t, string(body), `"error"`, "%s", body)
	require.Equal(t, "3", h.Get("x-ratelimit-limit-requests"), "status %d: %s", st, body)
	require.Equal(t, "0", h.Get("x-ratelimit-remaining-requests"))
	require.NotEmpty(t, h.Get("Retry-After"))

	// an unlimited key gets none
	free := agGenKey(t, b.A)
	_, h, body = postAs(t, b.B, free, "/a2a/rl-agent", sendRequest("r5", "hello"), nil)
	require.Contains(t, string(body), `"result"`, "%s", body)
	require.Empty(t, h.Get("x-ratelimit-limit-requests"))
}
