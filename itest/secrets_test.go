package itest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Sending back the masked value the API showed ("sk****3456", "http://u:****@host/v1") keeps
// the stored secret, on POST /model/update and PATCH /model/{id}/update (LiteLLM does the
// same); a new value still replaces it. The model keeps serving with the real key.
func TestMaskedSecretsSentBackKeepTheStoredOnes(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	base := "http://u:URLPASS@" + strings.TrimPrefix(up.URL, "http://") + "/v1"
	st, body := p.A.Do(t, "POST", "/model/new", map[string]any{
		"model_name":     "sec",
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": base, "api_key": "sk-real-123456"},
		"model_info":     map[string]any{"id": "sec-1"},
	})
	require.Equal(t, 200, st, "%s", body)
	// masked in the answer, URL password included
	require.Equal(t, "sk****3456", gjson.GetBytes(body, "litellm_params.api_key").String())
	maskedBase := gjson.GetBytes(body, "litellm_params.api_base").String()
	require.Equal(t, "http://u:****@"+strings.TrimPrefix(up.URL, "http://")+"/v1", maskedBase)
	require.NotContains(t, string(body), "URLPASS")

	stored := func(field string) string {
		return agScalar[string](t, p.DB, "SELECT litellm_params->>$1 FROM gateway.models WHERE model_id = 'sec-1'", field)
	}

	// /model/info shows the masks; they are sent back as they are
	st, body = p.A.Do(t, "GET", "/model/info?litellm_model_id=sec-1", nil)
	require.Equal(t, 200, st)
	shown := gjson.GetBytes(body, "data.0.litellm_params")
	require.Equal(t, "sk****3456", shown.Get("api_key").String())
	require.Equal(t, maskedBase, shown.Get("api_base").String())
	require.NotContains(t, string(body), "URLPASS")

	st, body = p.A.Do(t, "POST", "/model/update", `{"litellm_params":{"api_key":"sk****3456","api_base":"`+maskedBase+`","rpm":7},"model_info":{"id":"sec-1"}}`)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "sk-real-123456", stored("api_key"))
	require.Equal(t, base, stored("api_base"))
	require.Equal(t, "7", stored("rpm"))

	st, body = p.B.Do(t, "PATCH", "/model/sec-1/update", `{"litellm_params":{"api_key":"sk****3456","api_base":"`+maskedBase+`"}}`)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "sk-real-123456", stored("api_key"))
	require.Equal(t, base, stored("api_base"))

	// still served with the real key, on both replicas
	for _, g := range []*Gateway{p.A, p.B} {
		st, body = g.Do(t, "POST", "/v1/chat/completions", chatBody("sec", "hi", false))
		require.Equal(t, 200, st, "%s: %s", g.ReplicaID, body)
	}
	req, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, "Bearer sk-real-123456", req.Header.Get("Authorization"))

	// a real new value replaces the secret
	st, body = p.A.Do(t, "PATCH", "/model/sec-1/update", `{"litellm_params":{"api_key":"sk-new-999999"}}`)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "sk-new-999999", stored("api_key"))
}

// Agents: PUT and PATCH keep a litellm_params secret sent back masked; answers mask URL
// passwords.
func TestAgentMaskedSecretsSentBackKeepTheStoredOnes(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	params := map[string]any{"model": "openai/gpt-x", "api_base": "http://u:URLPASS@agent-up.invalid/v1", "api_key": "sk-agent-abcdef", "mock_response": "hi"}
	st, body := p.A.Do(t, "POST", "/v1/agents", map[string]any{"agent_name": "sec-agent", "agent_card_params": agentCard("sec-agent"), "litellm_params": params})
	require.Equal(t, 200, st, "%s", body)
	id := gjson.GetBytes(body, "agent_id").String()
	shown := gjson.GetBytes(body, "litellm_params")
	require.Equal(t, "sk****cdef", shown.Get("api_key").String())
	require.Equal(t, "http://u:****@agent-up.invalid/v1", shown.Get("api_base").String())
	require.NotContains(t, string(body), "URLPASS")

	stored := func(field string) string {
		return agScalar[string](t, p.DB, "SELECT litellm_params->>$1 FROM gateway.agents WHERE agent_id = $2", field, id)
	}
	st, body = p.B.Do(t, "GET", "/v1/agents/"+id, nil)
	require.Equal(t, 200, st, "%s", body)
	require.NotContains(t, string(body), "URLPASS")
	require.NotContains(t, string(body), "sk-agent-abcdef")

	// PUT with the masked params as shown
	st, body = p.A.Do(t, "PUT", "/v1/agents/"+id, `{"agent_name":"sec-agent","agent_card_params":`+gjson.GetBytes(body, "agent_card_params").Raw+`,"litellm_params":`+shown.Raw+`}`)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "sk-agent-abcdef", stored("api_key"))
	require.Equal(t, "http://u:URLPASS@agent-up.invalid/v1", stored("api_base"))

	st, body = p.B.Do(t, "PATCH", "/v1/agents/"+id, `{"litellm_params":{"api_key":"sk****cdef","mock_response":"patched"}}`)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "sk-agent-abcdef", stored("api_key"))
	require.Equal(t, "patched", stored("mock_response"))
}

// Guardrails: a secret in litellm_params (other guardrail types carry api_key / api_base) is
// masked in answers and kept when sent back masked; the content filter's own fields
// (blocked_words keywords, keyword_redaction_tag) are shown as they are.
func TestGuardrailSecretsMaskedAndKept(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{
		"guardrail_name": "sec-g",
		"litellm_params": map[string]any{
			"guardrail": "litellm_content_filter", "mode": "pre_call", "api_key": "gk-secret-0123456789",
			"keyword_redaction_tag": "[KEYWORD]",
			"blocked_words":         []any{map[string]any{"keyword": "codename-falcon", "action": "BLOCK"}},
		},
	}})
	require.Equal(t, 200, st, "%s", body)
	id := gjson.GetBytes(body, "guardrail_id").String()
	shown := gjson.GetBytes(body, "litellm_params")
	require.Equal(t, "gk****6789", shown.Get("api_key").String())
	require.Equal(t, "codename-falcon", shown.Get("blocked_words.0.keyword").String())
	require.Equal(t, "[KEYWORD]", shown.Get("keyword_redaction_tag").String())
	st, body = p.B.Do(t, "GET", "/guardrails/list", nil)
	require.Equal(t, 200, st)
	require.NotContains(t, string(body), "gk-secret-0123456789")

	stored := func() string {
		return agScalar[string](t, p.DB, "SELECT litellm_params->>'api_key' FROM gateway.guardrails WHERE guardrail_id = $1", id)
	}
	st, body = p.A.Do(t, "PUT", "/guardrails/"+id, `{"guardrail":{"guardrail_name":"sec-g","litellm_params":`+shown.Raw+`}}`)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "gk-secret-0123456789", stored())
	st, body = p.B.Do(t, "PATCH", "/guardrails/"+id, `{"litellm_params":{"api_key":"gk****6789","mode":"post_call"}}`)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "gk-secret-0123456789", stored())
	require.Equal(t, "post_call", gjson.GetBytes(body, "litellm_params.mode").String())
}

// An upstream 401 that echoes the deployment's key reaches a virtual key's caller redacted.
func TestUpstreamErrorDoesNotLeakTheDeploymentKey(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithStatus(401), fakeupstream.WithErrorMessage("Incorrect API key provided: sk-REALKEY-0123456789."))
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/model/new", map[string]any{
		"model_name":     "leaky",
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": "sk-REALKEY-0123456789"},
	})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.A.Do(t, "POST", "/key/generate", map[string]any{"models": []string{"leaky"}})
	require.Equal(t, 200, st, "%s", body)
	key := gjson.GetBytes(body, "key").String()
	for _, stream := range []bool{false, true} {
		st, body = p.B.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("leaky", "hi", stream))
		require.Equal(t, 401, st, "%s", body)
		require.Contains(t, string(body), "Incorrect API key provided: sk****6789")
		require.NotContains(t, string(body), "REALKEY")
	}
}
