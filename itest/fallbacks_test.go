package itest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/itest/pgtest"
)

// Fallbacks (issue 20) and LiteLLM's response headers and request hooks (issue 19 item 4):
// models written on replica a, called on replica b.

func fbChat(t *testing.T, g *Gateway, key string, body map[string]any, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	if body["messages"] == nil {
		body["messages"] = []any{map[string]any{"role": "user", "content": "hi"}}
	}
	return postAs(t, g, key, "/v1/chat/completions", body, hdr)
}

func fbErr(t *testing.T, b []byte) map[string]any {
	t.Helper()
	return JSON(t, b)["error"].(map[string]any)
}

// Each fallback kind from router_settings, on replica b for models written on a:
// fallbacks (a missing group is skipped), context_window_fallbacks, content_policy_fallbacks
// (each chosen by the upstream's error code), default_fallbacks for a group without an
// entry; a context-window error of a group context_window_fallbacks does not name has no
// fallback at all (LiteLLM), and its code is kept. A stream falls back before its first byte.
func TestFallbackKinds(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	cfg := `router_settings:
  num_retries: 0
  cooldown_time: 0
  fallbacks: [{fb-a: [fb-missing, fb-ok]}]
  context_window_fallbacks: [{fb-cw: [fb-big]}]
  content_policy_fallbacks: [{fb-cp: [fb-safe]}]
  default_fallbacks: [fb-default]
`
	a := StartGateway(t, db, "a", GatewayOpts{Config: cfg})
	b := StartGateway(t, db, "b", GatewayOpts{Config: cfg})
	down, cw, cp, ok := fakeupstream.Start(t), fakeupstream.Start(t), fakeupstream.Start(t), fakeupstream.Start(t)
	down.FailWith(500, "server_error", "upstream exploded")
	cw.FailWith(400, "context_length_exceeded", "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.")
	cp.FailWith(400, "content_policy_violation", "Your request was rejected as a result of our safety system.")
	for name, up := range map[string]*fakeupstream.Server{"fb-a": down, "fb-x": down, "fb-cw": cw, "fb-cw2": cw, "fb-cp": cp,
		"fb-ok": ok, "fb-big": ok, "fb-safe": ok, "fb-default": ok} {
		rtNewModel(t, a, name, name+"-id", up, nil)
	}
	for _, c := range []struct{ model, answeredBy string }{
		{"fb-a", "fb-ok-id"}, {"fb-cw", "fb-big-id"}, {"fb-cp", "fb-safe-id"}, {"fb-x", "fb-default-id"},
	} {
		st, h, body := fbChat(t, b, MasterKey, map[string]any{"model": c.model}, nil)
		require.Equal(t, 200, st, "%s: %s", c.model, body)
		require.Equal(t, c.answeredBy, h.Get("x-litellm-model-id"), c.model)
		require.Equal(t, "1", h.Get("x-litellm-attempted-fallbacks"), c.model)
	}
	// context_window_fallbacks is set but has no entry for fb-cw2: no fallback (not even the
	// default one); the upstream's code stays
	n := len(ok.Requests())
	st, _, body := fbChat(t, b, MasterKey, map[string]any{"model": "fb-cw2"}, nil)
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "context_length_exceeded", fbErr(t, body)["code"], "%s", body)
	require.Len(t, ok.Requests(), n, "no fallback was called")

	// streamed: the failure comes before the first byte, so the stream falls back
	st, h, body := fbChat(t, b, MasterKey, map[string]any{"model": "fb-a", "stream": true}, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "text/event-stream", h.Get("Content-Type"))
	require.Equal(t, "fb-ok-id", h.Get("x-litellm-model-id"))
	require.Equal(t, "1", h.Get("x-litellm-attempted-fallbacks"))
	require.Contains(t, string(body), "data: [DONE]")
}

// A request's fallbacks (LiteLLM: model names, or {"model": name}): used on replica b; never
// sent upstream; a key that may not call a fallback model is refused with LiteLLM's 401
// before any upstream call; the fallback runs the whole pipeline: a post_call guardrail BLOCK
// of the fallback's answer blocks, and the key's rpm_limit counts the fallback call (rpm 1:
// the failed first call used it, so the fallback is refused 429).
func TestRequestFallbacks(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: "router_settings: {num_retries: 0, cooldown_time: 0}\n"})
	down := fakeupstream.Start(t)
	down.FailWith(500, "server_error", "upstream exploded")
	ok := fakeupstream.Start(t, fakeupstream.WithReply(func(in fakeupstream.ReplyInput) string {
		if strings.Contains(in.Text, "trigger") {
			return "the answer holds forbidden-word inside"
		}
		return "fine"
	}))
	rtNewModel(t, p.A, "rq-main", "rq-main-id", down, nil)
	rtNewModel(t, p.A, "rq-ok", "rq-ok-id", ok, nil)
	rtNewModel(t, p.A, "rq-secret", "rq-secret-id", ok, nil)
	createGuardrail(t, p.A, "fb-block", contentFilter("post_call", map[string]any{
		"blocked_words": []any{word("forbidden-word", "BLOCK")}}))
	both, _ := govKey(t, p.A, map[string]any{"models": []any{"rq-main", "rq-ok"}})
	mainOnly, _ := govKey(t, p.A, map[string]any{"models": []any{"rq-main"}})
	limited, _ := govKey(t, p.A, map[string]any{"models": []any{"rq-main", "rq-ok"}, "rpm_limit": 1})

	for _, fb := range []any{[]any{"rq-ok"}, []any{map[string]any{"model": "rq-ok"}}} {
		ok.Reset()
		st, h, body := fbChat(t, p.B, both, map[string]any{"model": "rq-main", "fallbacks": fb}, nil)
		require.Equal(t, 200, st, "%s", body)
		require.Equal(t, "rq-ok-id", h.Get("x-litellm-model-id"))
		require.Equal(t, "1", h.Get("x-litellm-attempted-fallbacks"))
		reqs := ok.Requests()
		require.Len(t, reqs, 1)
		require.NotContains(t, string(reqs[0].Body), "fallbacks", "the fallbacks member is not sent upstream")
	}

	// without fallbacks the failure stands
	st, _, body := fbChat(t, p.B, both, map[string]any{"model": "rq-main"}, nil)
	require.Equal(t, 500, st, "%s", body)

	// a fallback the key may not call: LiteLLM's 401, no upstream called
	n := len(down.Requests())
	st, _, body = fbChat(t, p.B, mainOnly, map[string]any{"model": "rq-main", "fallbacks": []any{"rq-secret"}}, nil)
	require.Equal(t, 401, st, "%s", body)
	require.Equal(t, "key not allowed to access model. This key can only access models=['rq-main']. Tried to access rq-secret", fbErr(t, body)["message"])
	require.Len(t, down.Requests(), n)

	// a malformed fallbacks member is a 400 naming it
	st, _, body = fbChat(t, p.B, both, map[string]any{"model": "rq-main", "fallbacks": "rq-ok"}, nil)
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, fbErr(t, body)["message"], "fallbacks: must be a list of model names")

	// the guardrail runs on the fallback's answer
	st, _, body = fbChat(t, p.B, both, map[string]any{"model": "rq-main", "fallbacks": []any{"rq-ok"}, "guardrails": []any{"fb-block"},
		"messages": []any{map[string]any{"role": "user", "content": "trigger"}}}, nil)
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "Content blocked: keyword 'forbidden-word' detected", fbErr(t, body)["message"])

	// the key's limit counts the fallback: rpm_limit 1 was used by the failed first call
	ok.Reset()
	st, _, body = fbChat(t, p.B, limited, map[string]any{"model": "rq-main", "fallbacks": []any{"rq-ok"}}, nil)
	require.Equal(t, 429, st, "%s", body)
	require.Equal(t, "rate_limit_error", fbErr(t, body)["type"])
	require.Empty(t, ok.Requests(), "the refused fallback reached no upstream")
}

// LiteLLM's response headers on plain and streamed answers (replica b, models from a), the
// x-litellm-timeout request header, and the request hooks mock_testing_rate_limit_error,
// mock_testing_fallbacks and mock_timeout.
func TestLiteLLMHeadersAndHooks(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: "router_settings: {num_retries: 2, cooldown_time: 0}\n"})
	ok, down := fakeupstream.Start(t), fakeupstream.Start(t)
	down.FailWith(500, "server_error", "upstream exploded")
	slow := fakeupstream.Start(t)
	slow.SetLatency(20e9)
	st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "hd-main",
		"litellm_params": map[string]any{"model": "openai/m", "api_base": ok.URL + "/v1", "api_key": "k", "region_name": "eu-west-1", "timeout": 30},
		"model_info":     map[string]any{"id": "hd-main-id", "input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002}})
	require.Equal(t, 200, st, "%s", b)
	rtNewModel(t, p.A, "hd-other", "hd-other-id", ok, nil)
	rtNewModel(t, p.A, "hd-retry", "hd-retry-bad", down, map[string]any{"order": 1})
	rtNewModel(t, p.A, "hd-retry", "hd-retry-good", ok, map[string]any{"order": 2})
	rtNewModel(t, p.A, "hd-slow", "hd-slow-id", slow, map[string]any{"timeout": 60})

	key, token := govKey(t, p.A, map[string]any{})

	// plain
	st, h, body := fbChat(t, p.B, key, map[string]any{"model": "hd-main"}, nil)
	require.Equal(t, 200, st, "%s", body)
	require.NotEmpty(t, h.Get("x-litellm-call-id"))
	require.Equal(t, "hd-main-id", h.Get("x-litellm-model-id"))
	require.Equal(t, "eu-west-1", h.Get("x-litellm-model-region"))
	require.Equal(t, "0", h.Get("x-litellm-attempted-retries"))
	require.Equal(t, "2", h.Get("x-litellm-max-retries"))
	require.Equal(t, "30", h.Get("x-litellm-timeout"))
	require.Equal(t, "0", h.Get("x-litellm-attempted-fallbacks"))
	u := JSON(t, body)["usage"].(map[string]any)
	want := u["prompt_tokens"].(float64)*0.000001 + u["completion_tokens"].(float64)*0.000002
	cost, err := strconv.ParseFloat(h.Get("x-litellm-response-cost"), 64)
	require.NoError(t, err, h.Get("x-litellm-response-cost"))
	require.InDelta(t, want, cost, 1e-12)
	first := h.Get("x-litellm-call-id")
	firstID, _ := JSON(t, body)["id"].(string) // the spend log's request_id (LiteLLM: the response id)
	require.NotEmpty(t, firstID, "%s", body)

	// streamed: the same headers (the cost is not known before the stream ends)
	st, h, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "hd-main", "stream": true}, map[string]string{"x-litellm-timeout": "5"})
	require.Equal(t, 200, st, "%s", body)
	require.NotEmpty(t, h.Get("x-litellm-call-id"))
	require.NotEqual(t, first, h.Get("x-litellm-call-id"))
	require.Equal(t, "hd-main-id", h.Get("x-litellm-model-id"))
	require.Equal(t, "eu-west-1", h.Get("x-litellm-model-region"))
	require.Equal(t, "0", h.Get("x-litellm-attempted-retries"))
	require.Equal(t, "2", h.Get("x-litellm-max-retries"))
	require.Equal(t, "5", h.Get("x-litellm-timeout"), "the request's timeout")
	require.Equal(t, "0", h.Get("x-litellm-attempted-fallbacks"))
	require.Empty(t, h.Values("x-litellm-response-cost"))

	// a retry: the order-1 deployment fails, the order-2 one answers; no region there
	st, h, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "hd-retry"}, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "hd-retry-good", h.Get("x-litellm-model-id"))
	require.Equal(t, "1", h.Get("x-litellm-attempted-retries"))
	require.Empty(t, h.Values("x-litellm-model-region"))
	require.Equal(t, "600", h.Get("x-litellm-timeout"), "the default deployment timeout")

	// x-litellm-timeout is honoured (each attempt) and validated
	st, _, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "hd-slow"}, map[string]string{"x-litellm-timeout": "0.3"})
	require.Equal(t, 504, st, "%s", body)
	require.Contains(t, fbErr(t, body)["message"], "timed out after 300ms")
	for _, v := range []string{"NaN", "-1", "0", "soon", "Inf"} {
		st, _, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "hd-main"}, map[string]string{"x-litellm-timeout": v})
		require.Equal(t, 400, st, "%s: %s", v, body)
		require.Equal(t, "x-litellm-timeout: must be a number of seconds > 0, got \""+v+"\"", fbErr(t, body)["message"])
	}

	// mock_testing_rate_limit_error: a 429, no upstream called
	ok.Reset()
	st, h, body = fbChat(t, p.B, key, map[string]any{"model": "hd-main", "mock_testing_rate_limit_error": true}, nil)
	require.Equal(t, 429, st, "%s", body)
	failedID := h.Get("x-litellm-call-id")
	require.NotEmpty(t, failedID, "an admitted call's error answer carries its call id")
	require.Equal(t, "0", h.Get("x-litellm-attempted-fallbacks"))
	require.Empty(t, h.Values("x-litellm-response-cost"))
	require.Equal(t, "litellm.RateLimitError: This is a mock exception for model=hd-main, to trigger a rate limit error.. Received Model Group=hd-main\nAvailable Model Group Fallbacks=None", fbErr(t, body)["message"])
	require.Empty(t, ok.Requests())

	// the spend logs: the answered call under its response id, status success; the failed
	// one (no answer) under its x-litellm-call-id, status failure (LiteLLM SpendLogs.status)
	st, b = p.B.Do(t, "GET", "/spend/logs?api_key="+token, nil)
	require.Equal(t, 200, st, "%s", b)
	var logs []map[string]any
	require.NoError(t, json.Unmarshal(b, &logs))
	status := map[string]string{}
	failures := 0
	for _, l := range logs {
		status[l["request_id"].(string)] = l["status"].(string)
		if l["status"] == "failure" {
			failures++
		}
	}
	require.Equal(t, "success", status[firstID], "%s", b)
	require.Equal(t, "failure", status[failedID], "%s", b)
	require.Equal(t, 1, failures, "%s", b)

	// mock_testing_fallbacks: the requested group fails (500), its fallback answers
	st, _, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "hd-main", "mock_testing_fallbacks": true}, nil)
	require.Equal(t, 500, st, "%s", body)
	require.Equal(t, "litellm.InternalServerError: This is a mock exception for model=hd-main, to trigger a fallback. Fallbacks=None. Received Model Group=hd-main\nAvailable Model Group Fallbacks=None", fbErr(t, body)["message"])
	st, h, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "hd-main", "mock_testing_fallbacks": true, "fallbacks": []any{"hd-other"}}, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "hd-other-id", h.Get("x-litellm-model-id"))
	require.Equal(t, "1", h.Get("x-litellm-attempted-fallbacks"))
	require.Len(t, ok.Requests(), 1, "only the fallback reached an upstream")
	require.NotContains(t, string(ok.Requests()[0].Body), "mock_testing_fallbacks")

	// mock_timeout: waits the request's timeout, then LiteLLM's 408
	st, _, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "hd-main", "mock_timeout": true, "timeout": 0.2}, nil)
	require.Equal(t, 408, st, "%s", body)
	require.Equal(t, "litellm.Timeout: This is a mock timeout error. Received Model Group=hd-main\nAvailable Model Group Fallbacks=None", fbErr(t, body)["message"])

	// a hook flag must be a boolean
	st, _, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "hd-main", "mock_testing_fallbacks": "yes"}, nil)
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, `mock_testing_fallbacks: must be a boolean, got "yes"`, fbErr(t, body)["message"])
}

// The fallback's admission checks the key's budget again: a call whose first group is slow to
// fail is admitted while the key is under budget; meanwhile another call of the key spends the
// budget; the fallback is then refused with budget_exceeded and reaches no upstream.
func TestFallbackBudget(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: "router_settings: {num_retries: 0, cooldown_time: 0, fallbacks: [{bd-slow: [bd-fallback]}]}\n"})
	slow, ok, fb := fakeupstream.Start(t), fakeupstream.Start(t), fakeupstream.Start(t)
	slow.FailWith(500, "server_error", "upstream exploded")
	slow.SetLatency(5e9) // the upstream's delay: long enough for the other call to spend the budget
	rtNewModel(t, p.A, "bd-slow", "bd-slow-id", slow, nil)
	rtNewModel(t, p.A, "bd-fallback", "bd-fallback-id", fb, nil)
	st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "bd-priced",
		"litellm_params": map[string]any{"model": "openai/m", "api_base": ok.URL + "/v1", "api_key": "k"},
		"model_info":     map[string]any{"id": "bd-priced-id", "input_cost_per_token": 0.01}})
	require.Equal(t, 200, st, "%s", b)
	key, _ := govKey(t, p.A, map[string]any{"max_budget": 0.001})

	type result struct {
		st   int
		body []byte
	}
	done := make(chan result, 1)
	go func() {
		st, _, body := postAs(t, p.B, key, "/v1/chat/completions", map[string]any{"model": "bd-slow",
			"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil)
		done <- result{st, body}
	}()
	Eventually(t, "the slow call admitted and at its upstream", func() bool { return len(slow.Requests()) == 1 })
	st, _, body := fbChat(t, p.B, key, map[string]any{"model": "bd-priced"}, nil)
	require.Equal(t, 200, st, "%s", body) // spends more than the budget
	r := <-done
	require.Equal(t, 400, r.st, "%s", r.body)
	require.Equal(t, "budget_exceeded", fbErr(t, r.body)["type"], "%s", r.body)
	require.Empty(t, fb.Requests(), "the refused fallback reached no upstream")
}

// A stream that fails after its first byte does not fall back: it ends with the error event.
func TestFallbackNotAfterFirstByte(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: "router_settings: {num_retries: 0, cooldown_time: 0, fallbacks: [{cut: [cut-fb]}]}\n"})
	cut, fb := fakeupstream.Start(t, fakeupstream.WithStreamChunks(6), fakeupstream.WithStreamCutAfter(2)), fakeupstream.Start(t)
	rtNewModel(t, p.A, "cut", "cut-id", cut, nil)
	rtNewModel(t, p.A, "cut-fb", "cut-fb-id", fb, nil)
	st, h, body := fbChat(t, p.B, MasterKey, map[string]any{"model": "cut", "stream": true}, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "cut-id", h.Get("x-litellm-model-id"))
	require.Equal(t, "0", h.Get("x-litellm-attempted-fallbacks"))
	require.NotContains(t, string(body), "data: [DONE]", "%s", body)
	require.Empty(t, fb.Requests(), "no fallback once the stream has started")
}
