package itest

import (
	"bytes"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 17 (API.md "Request bodies"): one pass over every body a route forwards refuses
// nesting deeper than 128, a duplicate member anywhere and invalid UTF-8 with a 400 in the
// route's envelope, before anything reads the body, so nothing is forwarded.

// bodyKey creates a virtual key allowed models.
func bodyKey(t *testing.T, g *Gateway, models ...string) string {
	t.Helper()
	st, b := g.Do(t, "POST", "/key/generate", map[string]any{"models": models})
	require.Equal(t, 200, st, "%s", b)
	return gjson.GetBytes(b, "key").String()
}

// requireBodyError checks a 400 in the envelope of the route: Anthropic's on /v1/messages,
// JSON-RPC on /a2a/, OpenAI's elsewhere.
func requireBodyError(t *testing.T, path string, st int, b []byte, want string) {
	t.Helper()
	require.Equal(t, 400, st, "%s: %.300s", path, b)
	switch {
	case strings.HasPrefix(path, "/a2a/"):
		require.Equal(t, "2.0", gjson.GetBytes(b, "jsonrpc").String(), "%s: %s", path, b)
		require.Contains(t, gjson.GetBytes(b, "error.message").String(), want, "%s: %s", path, b)
	case strings.HasSuffix(path, "/messages"):
		require.Equal(t, "error", gjson.GetBytes(b, "type").String(), "%s: %s", path, b)
		require.Equal(t, "invalid_request_error", gjson.GetBytes(b, "error.type").String(), "%s: %s", path, b)
		require.Equal(t, want, gjson.GetBytes(b, "error.message").String(), "%s: %s", path, b)
	default:
		require.Equal(t, "invalid_request_error", gjson.GetBytes(b, "error.type").String(), "%s: %s", path, b)
		require.Equal(t, "400", gjson.GetBytes(b, "error.code").String(), "%s: %s", path, b)
		require.Equal(t, want, gjson.GetBytes(b, "error.message").String(), "%s: %s", path, b)
	}
}

// multipartForm is a multipart/form-data body of parts {name, filename ("" for a plain
// field), value}; the gateway reads the boundary from the body.
func multipartForm(t *testing.T, parts [][3]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		if p[1] == "" {
			require.NoError(t, mw.WriteField(p[0], p[2]))
			continue
		}
		w, err := mw.CreateFormFile(p[0], p[1])
		require.NoError(t, err)
		_, _ = w.Write([]byte(p[2]))
	}
	require.NoError(t, mw.Close())
	return buf.Bytes()
}

// Input 1: 12 MiB of "[" (under the 32 MiB limit) killed the replica with a Go stack overflow
// (gjson.ValidBytes recursed once per level). Now every forwarding route answers 400 naming
// the limit, on each replica, and both replicas still serve afterwards.
func TestBodyDeepNestingRefused(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	addModel(t, p.A, up)
	agentID := createAgent(t, p.A, "deep-agent", map[string]any{"model": "m"})
	key := bodyKey(t, p.A, "m")
	deep := strings.Repeat("[", 12<<20)
	const tooDeep = "JSON nesting deeper than the limit of 128 levels"
	for _, g := range []*Gateway{p.A, p.B} {
		for _, path := range []string{"/v1/chat/completions", "/chat/completions", "/v1/messages", "/v1/responses",
			"/v1/completions", "/v1/embeddings", "/openai/deployments/m/chat/completions", "/openai/responses"} {
			st, b := g.DoKey(t, key, "POST", path, deep)
			requireBodyError(t, path, st, b, tooDeep)
		}
		// an object nested deeper than the limit, under a valid model
		st, b := g.DoKey(t, key, "POST", "/v1/chat/completions",
			`{"model":"m","messages":[],"x":`+strings.Repeat(`{"a":`, 200)+"1"+strings.Repeat("}", 200)+"}")
		requireBodyError(t, "/v1/chat/completions", st, b, tooDeep)
		// A2A JSON-RPC (its own 10 MiB limit)
		st, b = g.DoKey(t, key, "POST", "/a2a/"+agentID, strings.Repeat("[", 9<<20))
		requireBodyError(t, "/a2a/", st, b, tooDeep)
		require.Equal(t, -32700, int(gjson.GetBytes(b, "error.code").Int()), "%s", b)
	}
	require.Empty(t, up.Requests(), "nothing was forwarded")
	// 128 levels are fine
	ok := `{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"x":` +
		strings.Repeat("[", 125) + strings.Repeat("]", 125) + "}}"
	for _, g := range []*Gateway{p.A, p.B} {
		st, b := g.DoKey(t, key, "POST", "/v1/chat/completions", ok)
		require.Equal(t, 200, st, "replica %s after the deep bodies: %s", g.ReplicaID, b)
		st, b = g.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("m", "still here", false))
		require.Equal(t, 200, st, "replica %s after the deep bodies: %s", g.ReplicaID, b)
	}
}

// Input 2: a key allowed only "cheap" sent a second "model" member; access, routing and
// pricing read the first, the upstream the last. Now a 400 naming the member, on every route
// and replica, and the upstream is never called.
func TestBodyDuplicateModelRefused(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	for _, m := range []string{"cheap", "gpt-4-expensive"} {
		st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": m, "litellm_params": map[string]any{
			"model": "openai/" + m + "-up", "api_base": up.URL + "/v1", "api_key": "sk-up"}})
		require.Equal(t, 200, st, "%s", b)
	}
	key := bodyKey(t, p.A, "cheap")
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const dupModel = `duplicate member "model" at model`
	for _, g := range []*Gateway{p.A, p.B} {
		for _, tc := range []struct{ path, body string }{
			{"/v1/chat/completions", `{"model":"cheap",` + msgs + `,"model":"gpt-4-expensive"}`},
			{"/chat/completions", `{"model":"cheap",` + msgs + `,"mod\u0065l":"gpt-4-expensive"}`},
			{"/v1/messages", `{"model":"cheap","max_tokens":16,` + msgs + `,"model":"gpt-4-expensive"}`},
			{"/v1/responses", `{"model":"cheap","input":"hi","model":"gpt-4-expensive"}`},
			{"/openai/deployments/cheap/chat/completions", `{"model":"cheap",` + msgs + `,"model":"gpt-4-expensive"}`},
			{"/openai/deployments/cheap/chat/completions", `{` + msgs + `,"model":"gpt-4-expensive","model":"cheap"}`},
		} {
			st, b := g.DoKey(t, key, "POST", tc.path, tc.body)
			requireBodyError(t, tc.path, st, b, dupModel)
		}
		// multipart (audio transcriptions): a second "model" field, or one sent as a file
		for want, parts := range map[string][][3]string{
			`duplicate form field "model"`:          {{"model", "", "cheap"}, {"file", "a.wav", "\x00audio"}, {"model", "", "gpt-4-expensive"}},
			`form field "model" must not be a file`: {{"file", "a.wav", "\x00audio"}, {"model", "m.txt", "gpt-4-expensive"}},
		} {
			st, b := g.DoKey(t, key, "POST", "/v1/audio/transcriptions", multipartForm(t, parts))
			requireBodyError(t, "/v1/audio/transcriptions", st, b, want)
		}
		// invalid UTF-8 is refused the same way
		st, b := g.DoKey(t, key, "POST", "/v1/chat/completions", "{\"model\":\"cheap\","+msgs+",\"user\":\"\xff\"}")
		requireBodyError(t, "/v1/chat/completions", st, b, "invalid UTF-8 in a JSON string at byte offset 69")
	}
	require.Empty(t, up.Requests(), "the upstream was never called")
	// the key still works for what it may use
	st, b := p.B.DoKey(t, key, "POST", "/v1/chat/completions", `{"model":"cheap",`+msgs+`}`)
	require.Equal(t, 200, st, "%s", b)
	r, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, "cheap-up", gjson.GetBytes(r.Body, "model").String())
}

// Input 3: a second "messages" member, a second "content" in one message, or a default_on
// BLOCK keyword in a second "messages" went past pre_call guardrails (they read the first,
// the upstream the last). Now each is a 400 and nothing is forwarded.
func TestBodyDuplicateMembersSkipNoGuardrail(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	addModel(t, p.A, up)
	createGuardrail(t, p.A, "mask-pii", contentFilter("pre_call", map[string]any{
		"patterns": []any{prebuilt("credit_card", "MASK"), prebuilt("email", "MASK")}}))
	createGuardrail(t, p.A, "block-always", contentFilter("pre_call", map[string]any{"default_on": true,
		"blocked_words": []any{word("forbidden-plan", "BLOCK")}}))
	key := bodyKey(t, p.A, "m")
	// both replicas run the default_on BLOCK before the duplicates are sent
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, "default_on guardrail on "+g.ReplicaID, func() bool {
			st, _ := g.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("m", "the forbidden-plan", false))
			return st == 400
		})
	}
	up.Reset()
	const card = "card 4111 1111 1111 1111 mail eve@example.com"
	for _, g := range []*Gateway{p.A, p.B} {
		for _, tc := range []struct{ path, body, want string }{
			{"/v1/chat/completions", `{"model":"m","guardrails":["mask-pii"],"messages":[{"role":"user","content":"hi"}],` +
				`"messages":[{"role":"user","content":"` + card + `"}]}`, `duplicate member "messages" at messages`},
			{"/v1/chat/completions", `{"model":"m","guardrails":["mask-pii"],"messages":[{"role":"system","content":"s"},` +
				`{"role":"user","content":"hi","content":"` + card + `"}]}`, `duplicate member "content" at messages[1].content`},
			{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],` +
				`"messages":[{"role":"user","content":"the forbidden-plan"}]}`, `duplicate member "messages" at messages`},
			{"/v1/messages", `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"hi",` +
				`"text":"the forbidden-plan"}]}]}`, `duplicate member "text" at messages[0].content[0].text`},
			{"/v1/responses", `{"model":"m","guardrails":["mask-pii"],"input":"hi","input":"` + card + `"}`,
				`duplicate member "input" at input`},
			{"/v1/chat/completions", `{"model":"m","metadata":{"guardrails":["mask-pii"],"guardrails":[]},` +
				`"messages":[{"role":"user","content":"` + card + `"}]}`, `duplicate member "guardrails" at metadata.guardrails`},
		} {
			st, b := g.DoKey(t, key, "POST", tc.path, tc.body)
			requireBodyError(t, tc.path, st, b, tc.want)
		}
	}
	// A2A JSON-RPC: HTTP 400 with JSON-RPC -32600, the text as above
	agentID := createAgent(t, p.A, "dup-agent", map[string]any{"model": "m"})
	for _, g := range []*Gateway{p.A, p.B} {
		st, b := g.DoKey(t, key, "POST", "/a2a/"+agentID, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":`+
			`{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi","text":"the forbidden-plan"}]}}}`)
		requireBodyError(t, "/a2a/", st, b, `Invalid Request: duplicate member "text" at params.message.parts[0].text`)
		require.Equal(t, -32600, int(gjson.GetBytes(b, "error.code").Int()), "%s", b)
	}
	require.Empty(t, up.Requests(), "nothing was forwarded")
	// the same texts in one member each are guarded as before
	st, b := p.B.DoKey(t, key, "POST", "/v1/chat/completions", `{"model":"m","guardrails":["mask-pii"],`+
		`"messages":[{"role":"user","content":"`+card+`"}]}`)
	require.Equal(t, 200, st, "%s", b)
	require.NotContains(t, upstreamUserText(t, up), "4111")
	require.NotContains(t, upstreamUserText(t, up), "eve@example.com")
}
