package itest

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// The guardrail leak test for the providers and routes of issue 14 (API.md "Security rules":
// guardrails see every text in every format and both directions). An email address is put in
// the request text of every route on every new provider (azure, ollama, gemini, vertex_ai
// Gemini and Claude, bedrock) and of the passthrough routes (completions, images, moderations,
// speech), streamed and not, under a MASK and a BLOCK pre_call guardrail: no upstream may
// receive it. Then each upstream is made to answer with it (chat, responses, messages,
// completions, images, transcriptions) under post_call guardrails: no client may receive it.
// Calls alternate between the two replicas; the models are created on A.

const (
	plSecret  = "pl.leak@example.com"
	plText    = "mail " + plSecret + " now"
	plTrigger = "PLEAKME"
)

// plRoute is one route of the leak table: its path and how the request carries text.
type plRoute struct {
	path   string
	stream bool
	body   func(model, text string, stream bool) map[string]any
}

func plRoutes(llm bool, passthrough bool) []plRoute {
	var out []plRoute
	if llm {
		out = append(out,
			plRoute{"/v1/chat/completions", true, func(m, s string, st bool) map[string]any {
				return map[string]any{"model": m, "stream": st, "messages": []any{map[string]any{"role": "system", "content": "sys " + s}, map[string]any{"role": "user", "content": s}}}
			}},
			plRoute{"/v1/responses", true, func(m, s string, st bool) map[string]any {
				return map[string]any{"model": m, "stream": st, "instructions": "be " + s, "input": s}
			}},
			plRoute{"/v1/messages", true, func(m, s string, st bool) map[string]any {
				return map[string]any{"model": m, "stream": st, "max_tokens": 64, "system": s, "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": s}}}}}
			}},
		)
	}
	if passthrough {
		out = append(out,
			plRoute{"/v1/completions", true, func(m, s string, st bool) map[string]any {
				return map[string]any{"model": m, "stream": st, "prompt": s}
			}},
			plRoute{"/v1/images/generations", false, func(m, s string, _ bool) map[string]any { return map[string]any{"model": m, "prompt": s} }},
			plRoute{"/v1/audio/speech", false, func(m, s string, _ bool) map[string]any {
				return map[string]any{"model": m, "input": s, "voice": "alloy"}
			}},
			plRoute{"/v1/moderations", false, func(m, s string, _ bool) map[string]any {
				return map[string]any{"model": m, "input": []any{s, map[string]any{"type": "text", "text": s}}}
			}},
		)
	}
	return out
}

func TestProvidersNeverLeak(t *testing.T) {
	t.Parallel()
	reply := fakeupstream.WithReply(func(in fakeupstream.ReplyInput) string {
		if strings.Contains(in.Text, plTrigger) {
			return plText
		}
		return "ok"
	})
	chunks := fakeupstream.WithStreamChunks(7)
	oa := fakeupstream.Start(t, reply, chunks)
	az := fakeupstream.StartAzure(t, fakeupstream.Azure{APIVersion: "2024-10-21", APIKey: "az-key-0001"}, reply, chunks)
	ol := fakeupstream.StartOllama(t, reply, chunks)
	gem := fakeupstream.StartGemini(t, "gem-key-0001", reply, chunks)
	vx := fakeupstream.StartVertex(t, "proj-leak", reply, chunks)
	brc := fakeupstream.Bedrock{Region: "us-east-1", AccessKeyID: "AKIALEAKTEST0001", SecretAccessKey: "leak/test/secret/0001"}
	br := fakeupstream.StartBedrock(t, brc, reply, chunks)
	p := StartPair(t, GatewayOpts{})

	type model struct {
		up          *fakeupstream.Server
		params      map[string]any
		passthrough bool // OpenAI-compatible: the passthrough routes too
	}
	sa := vx.ServiceAccountJSON()
	models := map[string]model{
		"l-oa":      {oa, map[string]any{"model": "openai/gpt-x", "api_base": oa.URL + "/v1", "api_key": "sk-up"}, true},
		"l-az":      {az, map[string]any{"model": "azure/dep", "api_base": az.URL, "api_key": "az-key-0001"}, true},
		"l-ollama":  {ol, map[string]any{"model": "ollama/llama3", "api_base": ol.URL}, false},
		"l-gemini":  {gem, map[string]any{"model": "gemini/gemini-2.0-flash", "api_base": gem.URL, "api_key": "gem-key-0001"}, false},
		"l-vgemini": {vx.Server, map[string]any{"model": "vertex_ai/gemini-2.5-pro", "api_base": vx.URL, "vertex_credentials": sa}, false},
		"l-vclaude": {vx.Server, map[string]any{"model": "vertex_ai/claude-sonnet-4", "api_base": vx.URL, "vertex_credentials": sa}, false},
		"l-bedrock": {br, map[string]any{"model": "bedrock/anthropic.claude-3-haiku-20240307-v1:0", "api_base": br.URL, "aws_region_name": brc.Region,
			"aws_access_key_id": brc.AccessKeyID, "aws_secret_access_key": brc.SecretAccessKey}, false},
	}
	for name, m := range models {
		createModel(t, p.A, name, m.params)
	}
	for _, mode := range []string{"pre_call", "post_call"} {
		for _, action := range []string{"MASK", "BLOCK"} {
			createGuardrail(t, p.A, "pl-"+mode+"-"+strings.ToLower(action), contentFilter(mode, map[string]any{"patterns": []any{prebuilt("email", action)}}))
		}
	}
	gateways := []*Gateway{p.A, p.B}
	n := 0
	requests := func(up *fakeupstream.Server) [][]byte {
		var out [][]byte
		for _, r := range up.Requests() {
			if r.Path != "/token" { // Vertex's OAuth2 token endpoint
				out = append(out, r.Body)
			}
		}
		return out
	}

	for name, m := range models {
		for _, rt := range plRoutes(true, m.passthrough) {
			for _, stream := range []bool{false, true} {
				if (stream && !rt.stream) || (rt.path == "/v1/moderations" && name == "l-az") {
					continue // Azure OpenAI serves no moderations (a 400 naming the provider)
				}
				for _, action := range []string{"mask", "block"} {
					t.Run(fmt.Sprintf("pre_call%s/%s/stream=%v/%s", rt.path, name, stream, action), func(t *testing.T) {
						m.up.Reset()
						body := rt.body(name, plText, stream)
						body["guardrails"] = []string{"pl-pre_call-" + action}
						g := gateways[n%2]
						n++
						st, out := g.Do(t, "POST", rt.path, body)
						reqs := requests(m.up)
						for _, r := range reqs {
							require.NotContains(t, string(r), plSecret, "the upstream received the secret")
						}
						if action == "mask" {
							require.Equal(t, 200, st, "%s", out)
							require.NotEmpty(t, reqs)
							require.Contains(t, string(reqs[len(reqs)-1]), "REDACTED")
						} else {
							require.Equal(t, 400, st, "%s", out)
							require.Contains(t, string(out), "Content blocked: ")
							require.Empty(t, reqs)
						}
					})
					t.Run(fmt.Sprintf("post_call%s/%s/stream=%v/%s", rt.path, name, stream, action), func(t *testing.T) {
						if rt.path == "/v1/audio/speech" || rt.path == "/v1/moderations" {
							t.Skip("speech answers audio bytes, moderations scores: no text to check")
						}
						body := rt.body(name, plTrigger+" please", stream)
						body["guardrails"] = []string{"pl-post_call-" + action}
						g := gateways[n%2]
						n++
						st, out := g.Do(t, "POST", rt.path, body)
						require.NotContains(t, string(out), plSecret, "the client received the secret")
						switch {
						case action == "mask":
							require.Equal(t, 200, st, "%s", out)
							if rt.path != "/v1/images/generations" || !stream {
								require.Contains(t, string(out), "REDACTED", "%s", out)
							}
						case stream:
							require.Equal(t, 200, st, "%s", out)
							require.Contains(t, string(out), "Content blocked: ", "%s", out)
						default:
							require.Equal(t, 400, st, "%s", out)
							require.Contains(t, string(out), "Content blocked: ")
						}
					})
				}
			}
		}
	}

	// Transcriptions (multipart): the "prompt" field is a text (pre_call), the transcript —
	// the fake transcribes the audio bytes — is one (post_call), as JSON or as plain text; the
	// guardrails are named in a "guardrails" form field.
	transcribe := func(g *Gateway, fields map[string]string, file string) (int, []byte) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range fields {
			require.NoError(t, mw.WriteField(k, v))
		}
		fw, err := mw.CreateFormFile("file", "a.wav")
		require.NoError(t, err)
		_, _ = io.WriteString(fw, file)
		require.NoError(t, mw.Close())
		req, err := http.NewRequest("POST", g.URL+"/v1/audio/transcriptions", &buf)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+MasterKey)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, out
	}
	for _, name := range []string{"l-oa", "l-az"} {
		up := models[name].up
		for _, action := range []string{"mask", "block"} {
			t.Run("pre_call/v1/audio/transcriptions/"+name+"/"+action, func(t *testing.T) {
				up.Reset()
				st, out := transcribe(gateways[n%2], map[string]string{"model": name, "prompt": plText, "guardrails": `["pl-pre_call-` + action + `"]`}, "audio")
				n++
				reqs := requests(up)
				for _, r := range reqs {
					require.NotContains(t, string(r), plSecret, "the upstream received the secret")
					require.NotContains(t, string(r), "pl-pre_call-", "the guardrails field went upstream")
				}
				if action == "mask" {
					require.Equal(t, 200, st, "%s", out)
					require.Len(t, reqs, 1)
					require.Contains(t, string(reqs[0]), "REDACTED")
				} else {
					require.Equal(t, 400, st, "%s", out)
					require.Contains(t, string(out), "Content blocked: ")
					require.Empty(t, reqs)
				}
			})
			for _, rf := range []string{"json", "text"} {
				t.Run("post_call/v1/audio/transcriptions/"+name+"/"+rf+"/"+action, func(t *testing.T) {
					st, out := transcribe(gateways[n%2], map[string]string{"model": name, "response_format": rf, "guardrails": "pl-post_call-" + action}, plText)
					n++
					require.NotContains(t, string(out), plSecret, "the client received the secret")
					if action == "mask" {
						require.Equal(t, 200, st, "%s", out)
						require.Contains(t, string(out), "REDACTED", "%s", out)
					} else {
						require.Equal(t, 400, st, "%s", out)
						require.Contains(t, string(out), "Content blocked: ")
					}
				})
			}
		}
	}

	// A default_on guardrail applies to a transcription that names none (created on B, which
	// applies its own write before answering).
	g := createGuardrail(t, p.B, "pl-default-mask", contentFilter("post_call", map[string]any{"default_on": true, "patterns": []any{prebuilt("email", "MASK")}}))
	require.NotEmpty(t, g)
	for _, name := range []string{"l-oa", "l-az"} {
		st, out := transcribe(p.B, map[string]string{"model": name}, plText)
		require.Equal(t, 200, st, "%s", out)
		require.NotContains(t, string(out), plSecret, "the client received the secret")
		require.Contains(t, string(out), "REDACTED", "%s", out)
	}
}
