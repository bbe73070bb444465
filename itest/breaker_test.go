package itest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Hostile inputs to the features of issues 19–21 found by the adversarial pass: each was
// accepted before and is refused (or bounded) now.

// A batch completion (comma-separated model) is bounded: 65 names are a 400 naming the bound
// (before, 100 000 names were 100 000 concurrent pipeline calls from one 1 MB request); 64
// names are served as a list of 64, duplicates included.
func TestBatchCompletionIsBounded(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	govMockModel(t, p.A, "bm", nil)
	call := func(n int) (int, []byte) {
		return p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": strings.Repeat("bm,", n-1) + "bm",
			"messages": []any{map[string]any{"role": "user", "content": "x"}}})
	}
	st, body := call(65)
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "model: a batch completion names at most 64 models, got 65", gjson.GetBytes(body, "error.message").Str, "%s", body)
	st, body = call(64)
	require.Equal(t, 200, st, "%s", body)
	var list []map[string]any
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list, 64)
	for _, r := range list {
		require.Equal(t, "chat.completion", r["object"], "%v", r)
	}
}

// A remote A2A agent whose card URL points back at the gateway itself (its own /a2a/<name>,
// with the master key) is bounded: every remote call carries X-Lockstep-A2A-Hops (the
// inbound count plus one) and the A2A route refuses a request that already passed through 8,
// so the loop ends and the client gets the refusal (before: thousands of nested calls a
// second until the outermost timeout). A malformed count is a 400 naming the header.
func TestRemoteA2AAgentLoopIsBounded(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/v1/agents", map[string]any{"agent_name": "loop",
		"agent_card_params": remoteCard("loop", "0.3", p.B.URL+"/a2a/loop"),
		"litellm_params":    map[string]any{"model": "a2a_agent/loop", "api_key": MasterKey, "timeout": 60}})
	require.Equal(t, 200, st, "%s", body)
	send := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{
		"kind": "message", "role": "user", "messageId": "m1", "parts": []any{map[string]any{"kind": "text", "text": "hi"}}}}}
	var msg string
	Eventually(t, "B serves the agent", func() bool {
		st, body = p.A.Do(t, "POST", "/a2a/loop", send)
		msg = string(body)
		return !strings.Contains(msg, "not found")
	})
	require.Contains(t, msg, "already passed through 8 remote A2A agent calls (X-Lockstep-A2A-Hops)", "status %d", st)
	send["method"] = "message/stream"
	st, body = p.A.Do(t, "POST", "/a2a/loop", send)
	require.Contains(t, string(body), "already passed through 8 remote A2A agent calls", "streamed: status %d", st)
	st, body = p.A.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "a2a/loop", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	require.NotEqual(t, 200, st, "%s", body)
	require.Contains(t, string(body), "already passed through 8 remote A2A agent calls", "as a model on an LLM route: %s", body)

	for hops, want := range map[string]string{"8": "already passed through 8", "x": "X-Lockstep-A2A-Hops: must be a non-negative integer"} {
		b, _ := json.Marshal(send)
		req, err := http.NewRequest("POST", p.B.URL+"/a2a/loop", bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+MasterKey)
		req.Header.Set("X-Lockstep-A2A-Hops", hops)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 400, resp.StatusCode, "%s", rb)
		require.Contains(t, string(rb), want)
	}
}

// An internal user does not lift the budget the proxy admin put on its key (API.md "No role
// raises its own ... budget"; LiteLLM _validate_update_key_data): /key/update with spend or
// a different max_budget is a 403 with LiteLLM's text and nothing is written — before, a user
// without a budget of its own raised its key's max_budget from 1.5 to 1000 and reset its spend
// to 0. Other fields, and the same max_budget, still update; a team admin still sets its team
// key's budget (within the team's).
func TestKeyOwnerCannotLiftKeyBudget(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	for _, u := range []map[string]any{{"user_id": "owner", "user_role": "internal_user", "auto_create_key": false},
		{"user_id": "tadmin", "user_role": "internal_user", "auto_create_key": false}} {
		st, body := p.A.Do(t, "POST", "/user/new", u)
		require.Equal(t, 200, st, "%s", body)
	}
	st, body := p.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "bt", "max_budget": 50,
		"members_with_roles": []map[string]any{{"user_id": "tadmin", "role": "admin"}}})
	require.Equal(t, 200, st, "%s", body)
	key, _ := govKey(t, p.A, map[string]any{"user_id": "owner", "max_budget": 1.5})
	adminKey, _ := govKey(t, p.A, map[string]any{"user_id": "tadmin", "team_id": "bt"})
	teamKey, _ := govKey(t, p.A, map[string]any{"team_id": "bt", "max_budget": 5})
	Eventually(t, "B serves the keys", func() bool {
		st1, _ := p.B.DoKey(t, key, "GET", "/key/info", nil)
		st2, _ := p.B.DoKey(t, adminKey, "GET", "/key/info", nil)
		return st1 == 200 && st2 == 200
	})
	for _, upd := range []map[string]any{{"max_budget": 1000}, {"max_budget": nil}, {"spend": 0}} {
		upd["key"] = key
		st, body := p.B.DoKey(t, key, "POST", "/key/update", upd)
		require.Equal(t, 403, st, "%v: %s", upd, body)
		require.Equal(t, "Only proxy admins, team admins, or org admins can call /key/update (max_budget/spend). user_role=internal_user, user_id=owner",
			gjson.GetBytes(body, "error.message").Str, "%s", body)
	}
	st, body = p.A.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 1.5, gjson.GetBytes(body, "info.max_budget").Float(), "nothing written: %s", body)
	st, body = p.B.DoKey(t, key, "POST", "/key/update", map[string]any{"key": key, "key_alias": "mine", "max_budget": 1.5})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.DoKey(t, adminKey, "POST", "/key/update", map[string]any{"key": teamKey, "max_budget": 20})
	require.Equal(t, 200, st, "a team admin sets its team key's budget: %s", body)
	require.Equal(t, 20.0, gjson.GetBytes(body, "max_budget").Float(), "%s", body)
}

// An aws_region_name that is not a region name is a 400 naming it and nothing is stored: the
// region is part of the endpoint's host, so "evil.com#" sent the SigV4-signed Bedrock (or
// SageMaker) request to bedrock-runtime.evil.com before.
func TestAWSRegionNameIsARegion(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	for _, c := range []struct{ model, region string }{{"bedrock/anthropic.claude-3-haiku-20240307-v1:0", "evil.com#"},
		{"bedrock/anthropic.claude-3-haiku-20240307-v1:0", "us-east-1/../x"}, {"sagemaker/my-endpoint", "x.evil.com?"}} {
		st, body := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "aws-bad", "litellm_params": map[string]any{"model": c.model,
			"aws_region_name": c.region, "aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}})
		require.Equal(t, 400, st, "%v: %s", c, body)
		require.Contains(t, gjson.GetBytes(body, "error.message").Str, "litellm_params.aws_region_name: \""+c.region+"\" is not an AWS region (like us-east-1)", "%s", body)
	}
	st, body := p.A.Do(t, "GET", "/model/info", nil)
	require.Equal(t, 200, st, "%s", body)
	require.NotContains(t, string(body), "aws-bad", "nothing stored")
	st, body = p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "aws-ok", "litellm_params": map[string]any{"model": "bedrock/anthropic.claude-3-haiku-20240307-v1:0",
		"aws_region_name": "us-gov-west-1", "aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}})
	require.Equal(t, 200, st, "%s", body)
}

// An agent whose reply stream fails after it started ends its A2A message/stream "failed"
// with the error, not "completed" with the text so far: a remote A2A agent streaming a failed
// final status (here the gateway itself, one hop short of the A2AHopsHeader bound), on B.
// Before, the pipeline's error frame was skipped as a frame without text.
func TestAgentStreamFailureIsAFailedTask(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/v1/agents", map[string]any{"agent_name": "loop2",
		"agent_card_params": remoteCard("loop2", "0.3", p.B.URL+"/a2a/loop2"),
		"litellm_params":    map[string]any{"model": "a2a_agent/loop2", "api_key": MasterKey, "timeout": 60}})
	require.Equal(t, 200, st, "%s", body)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": map[string]any{"message": map[string]any{
		"kind": "message", "role": "user", "messageId": "m1", "parts": []any{map[string]any{"kind": "text", "text": "hi"}}}}})
	var last gjson.Result
	Eventually(t, "B streams the agent", func() bool {
		req, err := http.NewRequest("POST", p.B.URL+"/a2a/loop2", bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+MasterKey)
		req.Header.Set("X-Lockstep-A2A-Hops", "6") // B calls B at 7, which calls B at 8: refused
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(rb), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				last = gjson.Get(d, "result")
			}
		}
		return last.Get("kind").Str == "status-update"
	})
	require.True(t, last.Get("final").Bool(), "%s", last.Raw)
	require.Equal(t, "failed", last.Get("status.state").Str, "%s", last.Raw)
	require.Contains(t, last.Get("status.message.parts.0.text").Str, "already passed through 8 remote A2A agent calls", "%s", last.Raw)
}
