package itest

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// The sentinel leak test (issue 8, API.md "Security rules": guardrails see every text in every
// format and both directions). A sentinel — an email address and a card number — is put in
// every text location of every route (chat, responses, messages, embeddings, A2A), streamed and
// not, under a MASK and a BLOCK guardrail, on two replica processes; it must appear nowhere in
// what the upstream receives (pre_call) or in what the client receives (post_call).

const (
	sentinelEmail = "leak.sentinel@example.com"
	sentinelCard  = "4111 1111 1111 1111"
	sentinel      = "write to " + sentinelEmail + " card " + sentinelCard + " ok"
	// leakMe in a user text makes the fake upstream answer with the sentinel.
	leakMe = "LEAKME"
)

// leaked reports which sentinel b contains ("" when none).
func leaked(b []byte) string {
	for _, s := range []string{sentinelEmail, sentinelCard} {
		if strings.Contains(string(b), s) {
			return s
		}
	}
	return ""
}

// sentinelGuardrail is a content filter on both sentinels with action in mode.
func sentinelGuardrail(mode, action string) map[string]any {
	return contentFilter(mode, map[string]any{"patterns": []any{prebuilt("email", action), prebuilt("credit_card", action)}})
}

// location is one request carrying the sentinel in one text location.
type location struct {
	name   string
	path   string // "" for A2A
	stream bool   // the location can be streamed
	body   func(model, text string, stream bool) map[string]any
	// form, for a multipart route (transcriptions), gives the form fields and the audio file
	// bytes instead of body; the guardrails go in a "guardrails" field.
	form func(text string) (fields map[string]string, file string)
	// openaiOnly: the route is served by OpenAI-compatible upstreams only (passthrough).
	openaiOnly bool
}

// multipartRequest is a multipart/form-data body: fields, then the audio file.
func multipartRequest(t *testing.T, fields map[string]string, file string) []byte {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		require.NoError(t, mw.WriteField(k, v))
	}
	fw, err := mw.CreateFormFile("file", "speech.wav")
	require.NoError(t, err)
	_, _ = io.WriteString(fw, file)
	require.NoError(t, mw.Close())
	return buf.Bytes()
}

// passthroughPreLocations are the request text locations of the passthrough routes:
// completions and images prompt, completions suffix, moderations and speech input, speech
// instructions, the transcription prompt.
func passthroughPreLocations() []location {
	simple := func(name, path, field string, stream bool, val func(s string) any, extra map[string]any) location {
		return location{name: name, path: path, stream: stream, openaiOnly: true, body: func(model, s string, st bool) map[string]any {
			b := map[string]any{"model": model, field: val(s)}
			if stream {
				b["stream"] = st
			}
			for k, v := range extra {
				b[k] = v
			}
			return b
		}}
	}
	str := func(s string) any { return s }
	return []location{
		simple("completions/prompt string", "/v1/completions", "prompt", true, str, nil),
		simple("completions/prompt array", "/v1/completions", "prompt", true, func(s string) any { return []any{"hi", s} }, nil),
		simple("images/prompt", "/v1/images/generations", "prompt", false, str, nil),
		simple("moderations/input string", "/v1/moderations", "input", false, str, nil),
		simple("moderations/input array", "/v1/moderations", "input", false, func(s string) any { return []any{"hi", s} }, nil),
		simple("moderations/input text object", "/v1/moderations", "input", false, func(s string) any {
			return []any{map[string]any{"type": "text", "text": s}}
		}, nil),
		simple("speech/input", "/v1/audio/speech", "input", false, str, map[string]any{"voice": "alloy"}),
		simple("speech/instructions", "/v1/audio/speech", "instructions", false, str, map[string]any{"voice": "alloy", "input": "hello"}),
		simple("completions/suffix", "/v1/completions", "suffix", true, str, map[string]any{"prompt": "hello"}),
		{name: "transcriptions/prompt", path: "/v1/audio/transcriptions", openaiOnly: true, form: func(s string) (map[string]string, string) {
			return map[string]string{"prompt": s, "language": "en"}, "RIFF audio"
		}},
	}
}

// passthroughPostLocations ask for the sentinel in the answer texts of the passthrough
// routes: completions choices[].text, images revised_prompt, and the transcript (json,
// verbose_json, text and srt; the fake transcribes the audio bytes, here the sentinel).
func passthroughPostLocations() []location {
	ask := leakMe + " " + sentinel
	out := []location{
		{name: "completions/choices text", path: "/v1/completions", stream: true, openaiOnly: true, body: func(model, _ string, st bool) map[string]any {
			return map[string]any{"model": model, "stream": st, "prompt": ask}
		}},
		{name: "images/revised_prompt", path: "/v1/images/generations", openaiOnly: true, body: func(model, _ string, _ bool) map[string]any {
			return map[string]any{"model": model, "prompt": ask}
		}},
	}
	for _, rf := range []string{"json", "verbose_json", "text", "srt"} {
		out = append(out, location{name: "transcriptions/text " + rf, path: "/v1/audio/transcriptions", openaiOnly: true,
			form: func(string) (map[string]string, string) { return map[string]string{"response_format": rf}, sentinel }})
	}
	return out
}

func userMsgs(text string) []any { return []any{map[string]any{"role": "user", "content": text}} }

// preLocations puts text (the sentinel) in every request text location of every route.
func preLocations() []location {
	chat := func(name string, msgs func(s string) []any, extra ...map[string]any) location {
		return location{name: "chat/" + name, path: "/v1/chat/completions", stream: true, body: func(model, s string, stream bool) map[string]any {
			b := map[string]any{"model": model, "stream": stream, "messages": msgs(s)}
			for _, e := range extra {
				for k, v := range e {
					b[k] = v
				}
			}
			return b
		}}
	}
	responses := func(name string, input func(s string) any, extra func(s string) map[string]any) location {
		return location{name: "responses/" + name, path: "/v1/responses", stream: true, body: func(model, s string, stream bool) map[string]any {
			b := map[string]any{"model": model, "stream": stream, "input": input(s)}
			if extra != nil {
				for k, v := range extra(s) {
					b[k] = v
				}
			}
			return b
		}}
	}
	messages := func(name string, msgs func(s string) []any, extra func(s string) map[string]any) location {
		return location{name: "messages/" + name, path: "/v1/messages", stream: true, body: func(model, s string, stream bool) map[string]any {
			b := map[string]any{"model": model, "stream": stream, "max_tokens": 32, "messages": msgs(s)}
			if extra != nil {
				for k, v := range extra(s) {
					b[k] = v
				}
			}
			return b
		}}
	}
	args := func(s string) string { return fmt.Sprintf(`{"to": %q, "nested": {"list": [%q]}}`, s, s) }
	return append([]location{
		chat("user string", userMsgs),
		chat("user text part", func(s string) []any {
			return []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": s}}}}
		}),
		chat("system", func(s string) []any {
			return []any{map[string]any{"role": "system", "content": s}, map[string]any{"role": "user", "content": "hi"}}
		}),
		chat("assistant content", func(s string) []any {
			return []any{map[string]any{"role": "user", "content": "hi"}, map[string]any{"role": "assistant", "content": s}, map[string]any{"role": "user", "content": "go on"}}
		}),
		chat("assistant tool_calls arguments", func(s string) []any {
			return []any{map[string]any{"role": "user", "content": "hi"},
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": args(s)}}}},
				map[string]any{"role": "tool", "tool_call_id": "c1", "content": "done"}}
		}),
		chat("tool result", func(s string) []any {
			return []any{map[string]any{"role": "user", "content": "hi"},
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}},
				map[string]any{"role": "tool", "tool_call_id": "c1", "content": s}}
		}),
		responses("input string", func(s string) any { return s }, nil),
		responses("instructions", func(string) any { return "hi" }, func(s string) map[string]any { return map[string]any{"instructions": s} }),
		responses("input message", func(s string) any { return []any{map[string]any{"role": "user", "content": s}} }, nil),
		responses("input_text part", func(s string) any {
			return []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": s}}}}
		}, nil),
		responses("function_call arguments", func(s string) any {
			return []any{map[string]any{"role": "user", "content": "hi"},
				map[string]any{"type": "function_call", "call_id": "c1", "name": "f", "arguments": args(s)},
				map[string]any{"type": "function_call_output", "call_id": "c1", "output": "done"}}
		}, nil),
		responses("function_call_output", func(s string) any {
			return []any{map[string]any{"role": "user", "content": "hi"},
				map[string]any{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
				map[string]any{"type": "function_call_output", "call_id": "c1", "output": s}}
		}, nil),
		messages("system", userMsgs, func(s string) map[string]any { return map[string]any{"system": s, "messages": userMsgs("hi")} }),
		messages("user string", userMsgs, nil),
		messages("text block", func(s string) []any {
			return []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": s}}}}
		}, nil),
		messages("tool_use input", func(s string) []any {
			return []any{map[string]any{"role": "user", "content": "hi"},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t1", "name": "f", "input": map[string]any{"to": s, "nested": map[string]any{"list": []any{s}}}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "done"}}}}
		}, nil),
		messages("tool_result content", func(s string) []any {
			return []any{map[string]any{"role": "user", "content": "hi"},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t1", "name": "f", "input": map[string]any{}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": []any{map[string]any{"type": "text", "text": s}}}}}}
		}, nil),
		{name: "embeddings/input string", path: "/v1/embeddings", body: func(model, s string, _ bool) map[string]any {
			return map[string]any{"model": model, "input": s}
		}},
		{name: "embeddings/input array", path: "/v1/embeddings", body: func(model, s string, _ bool) map[string]any {
			return map[string]any{"model": model, "input": []any{"hi", s}}
		}},
		{name: "a2a/text part", stream: true, body: func(_, s string, _ bool) map[string]any { return nil }},
	}, passthroughPreLocations()...)
}

// postLocations asks the model for the sentinel in every answer text location.
func postLocations() []location {
	ask := leakMe + " " + sentinel // the fake's tool call arguments repeat the user text
	tools := map[string][]any{
		"/v1/chat/completions": {map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}},
		"/v1/responses":        {map[string]any{"type": "function", "name": "f", "parameters": map[string]any{"type": "object"}}},
		"/v1/messages":         {map[string]any{"name": "f", "input_schema": map[string]any{"type": "object"}}},
	}
	var out []location
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		for _, tool := range []bool{false, true} {
			name := strings.TrimPrefix(path, "/v1/") + "/answer text"
			if tool {
				name = strings.TrimPrefix(path, "/v1/") + "/tool call arguments"
			}
			out = append(out, location{name: name, path: path, stream: true, body: func(model, _ string, stream bool) map[string]any {
				b := map[string]any{"model": model, "stream": stream, "max_tokens": 64}
				if path == "/v1/responses" {
					b["input"] = ask
				} else {
					b["messages"] = userMsgs(ask)
				}
				if tool {
					b["tools"] = tools[path]
				}
				return b
			}})
		}
	}
	return append(append(out, location{name: "a2a/reply", stream: true}), passthroughPostLocations()...)
}

func TestSentinelNeverLeaks(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithStreamChunks(9), fakeupstream.WithToolCalls(),
		fakeupstream.WithReply(func(in fakeupstream.ReplyInput) string {
			if strings.Contains(in.Text, leakMe) {
				return sentinel
			}
			return "ok"
		}))
	p := StartPair(t, GatewayOpts{})
	for name, params := range map[string]map[string]any{
		"oa": {"model": "openai/gpt-x", "api_base": up.URL + "/v1", "api_key": "sk-up"},
		"an": {"model": "anthropic/claude-x", "api_base": up.URL, "api_key": "sk-up"},
	} {
		st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": name, "litellm_params": params})
		require.Equal(t, 200, st, "%s", b)
	}
	for _, mode := range []string{"pre_call", "post_call"} {
		for _, action := range []string{"MASK", "BLOCK"} {
			name := mode + "-" + strings.ToLower(action)
			createGuardrail(t, p.A, name, sentinelGuardrail(mode, action))
			for _, model := range []string{"oa", "an"} {
				createAgent(t, p.A, "agent-"+name+"-"+model, map[string]any{"model": model, "guardrails": []string{name}})
			}
		}
	}
	gateways := []*Gateway{p.A, p.B}
	n := 0
	call := func(t *testing.T, loc location, model, guard, text string, stream bool) (int, []byte) {
		t.Helper()
		g := gateways[n%2]
		n++
		if loc.path == "" { // A2A
			method := "message/send"
			if stream {
				method = "message/stream"
			}
			req := sendRequest(n, text)
			req["method"] = method
			return rpc(t, g, "agent-"+guard+"-"+model, req)
		}
		if loc.form != nil {
			fields, file := loc.form(text)
			fields["model"] = model
			fields["guardrails"] = `["` + guard + `"]`
			return g.Do(t, "POST", loc.path, multipartRequest(t, fields, file))
		}
		body := loc.body(model, text, stream)
		body["guardrails"] = []string{guard}
		return g.Do(t, "POST", loc.path, body)
	}

	for _, loc := range preLocations() {
		for _, model := range []string{"oa", "an"} {
			if (loc.openaiOnly || strings.HasPrefix(loc.name, "embeddings")) && model == "an" {
				continue // Anthropic serves no embeddings and no passthrough route
			}
			for _, stream := range []bool{false, true} {
				if stream && !loc.stream {
					continue
				}
				for _, action := range []string{"mask", "block"} {
					guard := "pre_call-" + action
					t.Run(fmt.Sprintf("pre_call/%s/%s/stream=%v/%s", loc.name, model, stream, action), func(t *testing.T) {
						up.Reset()
						st, body := call(t, loc, model, guard, sentinel, stream)
						for _, r := range up.Requests() {
							require.Empty(t, leaked(r.Body), "the upstream received the sentinel: %s", r.Body)
						}
						a2a := loc.path == ""
						switch {
						case action == "mask":
							require.Equal(t, 200, st, "%s", body)
							require.False(t, gjson.GetBytes(body, "error").IsObject(), "%s", body)
							require.NotEmpty(t, up.Requests(), "the masked request went upstream")
							found := false
							for _, r := range up.Requests() {
								found = found || strings.Contains(string(r.Body), "REDACTED")
							}
							require.True(t, found, "the upstream received the masked text")
						case a2a && !stream:
							require.Equal(t, int64(-32602), gjson.GetBytes(body, "error.code").Int(), "%s", body)
							require.Empty(t, up.Requests())
						case a2a:
							require.Contains(t, string(body), `"state":"failed"`)
							require.Empty(t, up.Requests())
						default:
							require.Equal(t, 400, st, "%s", body)
							require.Contains(t, string(body), "Content blocked: ")
							require.Empty(t, up.Requests())
						}
					})
				}
			}
		}
	}

	for _, loc := range postLocations() {
		for _, model := range []string{"oa", "an"} {
			if loc.openaiOnly && model == "an" {
				continue
			}
			for _, stream := range []bool{false, true} {
				if stream && !loc.stream {
					continue
				}
				for _, action := range []string{"mask", "block"} {
					guard := "post_call-" + action
					t.Run(fmt.Sprintf("post_call/%s/%s/stream=%v/%s", loc.name, model, stream, action), func(t *testing.T) {
						up.Reset()
						st, body := call(t, loc, model, guard, leakMe+" please", stream)
						require.Empty(t, leaked(body), "the client received the sentinel: %s", body)
						require.NotEmpty(t, up.Requests())
						a2a := loc.path == ""
						switch {
						case action == "mask":
							require.Equal(t, 200, st, "%s", body)
							require.Contains(t, string(body), "REDACTED", "%s", body)
							require.False(t, gjson.GetBytes(body, "error").IsObject(), "%s", body)
							require.NotContains(t, string(body), `"state":"failed"`)
						case a2a && !stream:
							require.Equal(t, int64(-32603), gjson.GetBytes(body, "error.code").Int(), "%s", body)
						case a2a:
							require.Contains(t, string(body), `"state":"failed"`)
						case stream:
							require.Equal(t, 200, st, "%s", body)
							require.Contains(t, string(body), "Content blocked: ", "%s", body)
						default:
							require.Equal(t, 400, st, "%s", body)
							require.Contains(t, string(body), "Content blocked: ")
						}
					})
				}
			}
		}
	}
}
