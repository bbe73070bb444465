package itest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 17 input 1, the same kind of fault one level down: JSON text inside a JSON string of
// a valid body (tool-call arguments, a tool result) is parsed again when the request is
// translated for an Anthropic or Gemini deployment. gjson.Valid recursed once per level, so
// 12 MiB of "[" as the arguments killed the replica (fatal error: stack overflow). Now the
// text is checked without recursion: too deep is not a JSON object, sent as {} (arguments) or
// as text (a tool result), and both replicas keep serving.
func TestBodyDeepJSONInsideStringsKeepsReplicaUp(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	gem := fakeupstream.StartGemini(t, "gem-key-deep")
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "ant", map[string]any{"model": "anthropic/claude-x", "api_base": up.URL, "api_key": "sk-ant"})
	createModel(t, p.A, "gem", map[string]any{"model": "gemini/gemini-2.0-flash", "api_base": gem.URL, "api_key": "gem-key-deep"})
	key := bodyKey(t, p.A, "ant", "gem")
	deep := strings.Repeat("[", 12<<20)
	call := func(model, args, result string) []byte {
		b, err := json.Marshal(map[string]any{"model": model, "max_tokens": 16, "messages": []any{
			map[string]any{"role": "user", "content": "hi"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": args}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": result},
		}})
		require.NoError(t, err)
		return b
	}
	for _, g := range []*Gateway{p.A, p.B} {
		for _, tc := range []struct{ model, args, result string }{
			{"ant", deep, "ok"},     // chat → Anthropic: tool_use input from the arguments
			{"gem", deep, "ok"},     // chat → Gemini: functionCall args
			{"gem", `{}`, deep},     // chat → Gemini: functionResponse from the tool result
			{"ant", `{"a":1}`, "x"}, // control
		} {
			st, b := g.DoKey(t, key, "POST", "/v1/chat/completions", call(tc.model, tc.args, tc.result))
			require.Equal(t, 200, st, "%s on %s: %.300s", tc.model, g.ReplicaID, b)
		}
		// /v1/responses → Anthropic: a function_call item's arguments
		st, b := g.DoKey(t, key, "POST", "/v1/responses", map[string]any{"model": "ant", "input": []any{
			map[string]any{"type": "message", "role": "user", "content": "hi"},
			map[string]any{"type": "function_call", "call_id": "c1", "name": "f", "arguments": deep},
			map[string]any{"type": "function_call_output", "call_id": "c1", "output": "ok"},
		}})
		require.Equal(t, 200, st, "responses on %s: %.300s", g.ReplicaID, b)
	}
	// the too-deep arguments went upstream as an empty input object, the control as sent
	var inputs []string
	for _, r := range up.Requests() {
		gjson.GetBytes(r.Body, "messages.#.content.#(type==\"tool_use\").input").ForEach(func(_, v gjson.Result) bool {
			inputs = append(inputs, v.Raw)
			return true
		})
	}
	require.Contains(t, inputs, "{}")
	require.Contains(t, inputs, `{"a":1}`)
	for _, g := range []*Gateway{p.A, p.B} {
		st, b := g.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("ant", "still here", false))
		require.Equal(t, 200, st, "replica %s after the deep strings: %s", g.ReplicaID, b)
	}
}

// Issue 17 input 2, the same kind of fault in a member's type: the gateway streams only on
// "stream": true, but lenient upstreams (pydantic-based servers such as vLLM; LiteLLM tests
// truthiness) stream on "true" or 1. Such a call went out as a non-streamed one, its SSE
// answer came back as one opaque body: charged 0 and past post_call guardrails. Now a
// "stream" that is not a boolean (or null) is a 400 on every streaming route, nothing sent.
func TestBodyStreamMustBeBoolean(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	addModel(t, p.A, up)
	key := bodyKey(t, p.A, "m")
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, g := range []*Gateway{p.A, p.B} {
		for _, v := range []string{`"true"`, `1`, `"1"`, `{}`, `[true]`} {
			for _, tc := range []struct{ path, body string }{
				{"/v1/chat/completions", `{"model":"m",` + msgs + `,"stream":` + v + `}`},
				{"/v1/completions", `{"model":"m","prompt":"hi","stream":` + v + `}`},
				{"/v1/messages", `{"model":"m","max_tokens":16,` + msgs + `,"stream":` + v + `}`},
				{"/v1/responses", `{"model":"m","input":"hi","stream":` + v + `}`},
				{"/openai/deployments/m/chat/completions", `{` + msgs + `,"stream":` + v + `}`},
			} {
				st, b := g.DoKey(t, key, "POST", tc.path, tc.body)
				requireBodyError(t, tc.path, st, b, "stream must be a boolean")
			}
		}
	}
	require.Empty(t, up.Requests(), "nothing was forwarded")
	for _, v := range []string{`true`, `false`, `null`} {
		st, b := p.B.DoKey(t, key, "POST", "/v1/chat/completions", `{"model":"m",`+msgs+`,"stream":`+v+`}`)
		require.Equal(t, 200, st, "stream %s: %s", v, b)
	}
}

// Issue 17 input 2 in a multipart body (audio transcriptions): a part whose form name Go's
// reader and Python's (python-multipart, under FastAPI/Starlette upstreams and LiteLLM) read
// differently was a second "model" the gateway never saw: `name="x"; name="model"` (no name to
// Go, "model" to python-multipart, which keeps the last parameter), or `name="x";
// name*=utf-8”model` the other way round. Forwarded next to the checked "model", the
// upstream (keeping the last field) ran the hidden one. Now such a part is a 400, nothing sent;
// a non-ASCII filename* stays accepted.
func TestBodyMultipartAmbiguousPartNamesRefused(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	for _, m := range []string{"cheap", "gpt-4-expensive"} {
		st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": m, "litellm_params": map[string]any{
			"model": "openai/" + m + "-up", "api_base": up.URL + "/v1", "api_key": "sk-up"}})
		require.Equal(t, 200, st, "%s", b)
	}
	key := bodyKey(t, p.A, "cheap")
	form := func(hidden string) string {
		return "--XB\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ncheap\r\n" +
			"--XB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFFxxxx\r\n" +
			"--XB\r\n" + hidden + "\r\n\r\ngpt-4-expensive-up\r\n--XB--\r\n"
	}
	for _, g := range []*Gateway{p.A, p.B} {
		for hidden, want := range map[string]string{
			`Content-Disposition: form-data; name="x"; name="model"`:                                       "malformed multipart body: part 2: Content-Disposition: mime: duplicate parameter name",
			`Content-Disposition: form-data; name="x"; name*=utf-8''model`:                                 "malformed multipart body: part 2: Content-Disposition: the form name must be a plain name= parameter",
			"Content-Disposition: form-data; name=\"x\"\r\ncontent-disposition: form-data; name=\"model\"": "malformed multipart body: part 2: more than one Content-Disposition header",
		} {
			st, b := g.DoKey(t, key, "POST", "/v1/audio/transcriptions", form(hidden))
			requireBodyError(t, "/v1/audio/transcriptions", st, b, want)
		}
	}
	require.Empty(t, up.Requests(), "nothing was forwarded")
	ok := "--XB\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ncheap\r\n" +
		"--XB\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%E2%82%AC.wav\r\nContent-Type: audio/wav\r\n\r\nRIFFxxxx\r\n--XB--\r\n"
	st, b := p.B.DoKey(t, key, "POST", "/v1/audio/transcriptions", ok)
	require.Equal(t, 200, st, "%s", b)
}
