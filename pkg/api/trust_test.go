package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/a2a"
	"lockstep/pkg/api"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/keys"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

// Regression tests for issue 8 ("Trust"), inputs 1–4: guardrails see every text location, and
// A2A goes through the same pipeline (model access) as the LLM routes.

const cardNo = "4111 1111 1111 1111"

// addGuardrail serves a config guardrail named name.
func (b *bundle) addGuardrail(t *testing.T, name, params string) {
	t.Helper()
	g, err := guardrail.Compile(name, []byte(params))
	require.NoError(t, err)
	cur := map[string]*guardrail.Guardrail{}
	b.guardrails.Load().All(func(e *registry.Entry[*guardrail.Guardrail]) bool { cur[e.ID] = e.Value; return true })
	cur["config:"+name] = g
	b.guardrails.SetConfig(cur)
}

// Input 1: a pre_call MASK guardrail masks a cardNo number inside an assistant turn's tool-call
// arguments (chat) and tool_use input (messages), keeping the arguments valid JSON; the
// upstream never receives the number, whether the route passes through or translates.
func TestPreCallMasksToolCallArguments(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{
		"oa": mustDeployment(t, "oa", "oa", fmt.Sprintf(`{"model":"openai/gpt-x","api_base":%q,"api_key":"sk-up"}`, up.URL+"/v1"), ""),
		"an": mustDeployment(t, "an", "an", fmt.Sprintf(`{"model":"anthropic/claude-x","api_base":%q,"api_key":"sk-up"}`, up.URL), ""),
	})
	b.addGuardrail(t, "cards", `{"guardrail":"litellm_content_filter","mode":"pre_call","patterns":[{"pattern_type":"prebuilt","pattern_name":"credit_card","action":"MASK"}]}`)

	chat := func(model string) string {
		return `{"model":"` + model + `","guardrails":["cards"],"messages":[
			{"role":"user","content":"pay"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"pay","arguments":"{\"cardNo\": \"` + cardNo + `\", \"n\": 1}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"charged ` + cardNo + `"},
			{"role":"user","content":"thanks"}]}`
	}
	messages := func(model string) string {
		return `{"model":"` + model + `","max_tokens":16,"guardrails":["cards"],"messages":[
			{"role":"user","content":"pay"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"pay","input":{"cardNo":"` + cardNo + `","nested":{"list":["` + cardNo + `"]}}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"charged ` + cardNo + `"}]}]}]}`
	}
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", chat("oa")},
		{"/v1/chat/completions", chat("an")},
		{"/v1/messages", messages("an")},
		{"/v1/messages", messages("oa")},
	} {
		up.Reset()
		w := b.do(t, "sk-master", "POST", tc.path, tc.body)
		require.Equal(t, 200, w.Code, "%s %s", tc.path, w.Body.String())
		reqs := up.Requests()
		require.Len(t, reqs, 1)
		sent := string(reqs[0].Body)
		require.NotContains(t, sent, cardNo, "%s: the upstream received the cardNo: %s", tc.path, sent)
		require.NotContains(t, sent, "4111", sent)
		require.Contains(t, sent, "REDACTED", sent)
		// the arguments are still valid JSON with the value masked inside
		gjson.GetBytes(reqs[0].Body, "messages").ForEach(func(_, m gjson.Result) bool {
			m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
				args := tc.Get("function.arguments").Str
				require.True(t, gjson.Valid(args), "arguments are valid JSON: %q", args)
				require.Contains(t, gjson.Get(args, "cardNo").Str, "REDACTED")
				return true
			})
			m.Get("content").ForEach(func(_, blk gjson.Result) bool {
				if blk.Get("type").Str == "tool_use" {
					require.Contains(t, blk.Get("input.cardNo").Str, "REDACTED")
				}
				return true
			})
			return true
		})
	}
}

// Input 2: a post_call MASK guardrail on a streamed /v1/responses answer masks the address in
// the deltas and in every frame that repeats the text: response.output_text.done,
// response.content_part.done, response.output_item.done and response.completed.
func TestPostCallMaskCoversDoneFrames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{
		"mock": mustDeployment(t, "mock", "mock", `{"model":"openai/gpt-x","mock_response":"write to alice@example.com today"}`, ""),
	})
	b.addGuardrail(t, "emails", `{"guardrail":"litellm_content_filter","mode":"post_call","patterns":[{"pattern_type":"prebuilt","pattern_name":"email","action":"MASK"}]}`)
	for _, path := range []string{"/v1/responses", "/v1/chat/completions", "/v1/messages"} {
		for _, stream := range []bool{true, false} {
			body := fmt.Sprintf(`{"model":"mock","stream":%v,"max_tokens":9,"guardrails":["emails"],"input":"hi","messages":[{"role":"user","content":"hi"}]}`, stream)
			w := b.do(t, "sk-master", "POST", path, body)
			require.Equal(t, 200, w.Code, w.Body.String())
			out := w.Body.String()
			require.NotContains(t, out, "alice@example.com", "%s stream=%v: %s", path, stream, out)
			require.Contains(t, out, "[EMAIL_REDACTED]", out)
			if path == "/v1/responses" && stream {
				for _, ev := range []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"} {
					data := sseEvent(t, out, ev)
					require.Contains(t, data, "write to [EMAIL_REDACTED] today", "%s: %s", ev, data)
				}
			}
		}
	}
}

// sseEvent returns the data of the first SSE frame named event in body.
func sseEvent(t *testing.T, body, event string) string {
	t.Helper()
	for _, frame := range strings.Split(body, "\n\n") {
		if strings.Contains(frame, "event: "+event+"\n") {
			_, data, _ := strings.Cut(frame, "data: ")
			return data
		}
	}
	t.Fatalf("no %s event in %s", event, body)
	return ""
}

// twoChoices is an OpenAI-compatible upstream answering every chat call with n=2 choices, the
// second saying second (streamed or not).
func twoChoices(t *testing.T, second string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[
				{"index":0,"message":{"role":"assistant","content":"all fine"},"finish_reason":"stop"},
				{"index":1,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, second)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(i int, content string) {
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":%d,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", i, content)
		}
		// the second choice's text arrives in pieces, interleaved with the first's
		words := strings.SplitAfter(second, " ")
		for i, w := range words {
			chunk(0, fmt.Sprintf("part%d ", i))
			chunk(1, w)
		}
		for i := range 2 {
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":%d,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", i)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Input 3: with n=2, BLOCK checks every choice, streamed or not, and MASK masks every choice.
func TestGuardrailsCheckEveryChoice(t *testing.T) {
	t.Parallel()
	up := twoChoices(t, "the launch code is alpha bravo charlie, mail bob@example.com now")
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{
		"two": mustDeployment(t, "two", "two", fmt.Sprintf(`{"model":"openai/gpt-x","api_base":%q,"api_key":"sk-up"}`, up.URL), ""),
	})
	b.addGuardrail(t, "block", `{"guardrail":"litellm_content_filter","mode":"post_call","blocked_words":[{"keyword":"alpha bravo charlie","action":"BLOCK"}]}`)
	b.addGuardrail(t, "mask", `{"guardrail":"litellm_content_filter","mode":"post_call","patterns":[{"pattern_type":"prebuilt","pattern_name":"email","action":"MASK"}]}`)

	body := func(stream bool, g string) string {
		return fmt.Sprintf(`{"model":"two","n":2,"stream":%v,"guardrails":[%q],"messages":[{"role":"user","content":"hi"}]}`, stream, g)
	}
	w := b.do(t, "sk-master", "POST", "/v1/chat/completions", body(false, "block"))
	require.Equal(t, 400, w.Code, w.Body.String())
	require.Equal(t, "Content blocked: keyword 'alpha bravo charlie' detected", gjson.Get(w.Body.String(), "error.message").Str)

	w = b.do(t, "sk-master", "POST", "/v1/chat/completions", body(true, "block"))
	require.Equal(t, 200, w.Code)
	out := w.Body.String()
	require.Contains(t, out, `"message":"Content blocked: keyword 'alpha bravo charlie' detected"`, out)
	require.NotContains(t, joinChoice(t, out, 1, true), "charlie", "the keyword's last word never leaves: %s", out)
	require.Contains(t, joinChoice(t, out, 1, true), "alpha bravo", "the stream went on until the keyword completed: %s", out)
	require.NotContains(t, out, "[DONE]")

	for _, stream := range []bool{false, true} {
		w = b.do(t, "sk-master", "POST", "/v1/chat/completions", body(stream, "mask"))
		require.Equal(t, 200, w.Code, w.Body.String())
		require.NotContains(t, w.Body.String(), "bob@example.com", "stream=%v: %s", stream, w.Body.String())
		require.Contains(t, joinChoice(t, w.Body.String(), 1, stream), "mail [EMAIL_REDACTED] now")
	}
}

// joinChoice is the text of choice i of a chat answer (its deltas joined when streamed).
func joinChoice(t *testing.T, body string, i int, stream bool) string {
	t.Helper()
	if !stream {
		return gjson.Get(body, fmt.Sprintf("choices.%d.message.content", i)).Str
	}
	var sb strings.Builder
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || !gjson.Valid(data) {
			continue
		}
		gjson.Get(data, "choices").ForEach(func(_, c gjson.Result) bool {
			if c.Get("index").Int() == int64(i) {
				sb.WriteString(c.Get("delta.content").Str)
			}
			return true
		})
	}
	return sb.String()
}

// Input 4: a virtual key whose models do not include the agent's model is refused, also when
// the agent has its own upstream (litellm_params model + api_base + api_key), and the
// upstream is never called. A key allowed that model is served.
func TestAgentOwnUpstreamChecksKeyModelAccess(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{
		"cheap": mustDeployment(t, "cheap", "cheap", `{"model":"openai/x","mock_response":"cheap"}`, ""),
	})
	b.agents.SetConfig(map[string]*a2a.Agent{"own": mustAgent(t, "own", "own",
		fmt.Sprintf(`{"model":"openai/gpt-4o","api_base":%q,"api_key":"sk-agent"}`, up.URL+"/v1"))})
	b.addKey("sk-cheap", "cheap")
	b.addKey("sk-4o", "openai/gpt-4o")

	w := b.do(t, "sk-cheap", "POST", "/a2a/own", sendRPC("message/send", "hi"))
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Equal(t, int64(a2a.CodeUnauthorized), gjson.Get(w.Body.String(), "error.code").Int(), w.Body.String())
	require.Equal(t, "key not allowed to access model. This key can only access models=['cheap']. Tried to access openai/gpt-4o",
		gjson.Get(w.Body.String(), "error.message").Str)
	w = b.do(t, "sk-cheap", "POST", "/a2a/own", sendRPC("message/stream", "hi"))
	require.Contains(t, w.Body.String(), `"state":"failed"`)
	require.Contains(t, w.Body.String(), "Tried to access openai/gpt-4o")
	require.Empty(t, up.Requests(), "a refused call never reaches the agent's upstream")

	w = b.do(t, "sk-4o", "POST", "/a2a/own", sendRPC("message/send", "hi"))
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Equal(t, "agent", gjson.Get(w.Body.String(), "result.role").Str, w.Body.String())
	require.Len(t, up.Requests(), 1)
}

// The limits step: Admit runs once per call after model access (a refusal is answered as is
// and nothing reaches the upstream), and the ticket learns the deployment and usage when the
// call ends, streamed or not, on the LLM routes and A2A alike.
func TestPipelineLimitsHook(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	lim := &recordingAdmitter{}
	b := setupWith(t, func(d *api.Deps) { d.Limits = lim })
	b.models.SetConfig(map[string]*router.Deployment{
		"m": mustDeployment(t, "m", "m", fmt.Sprintf(`{"model":"openai/gpt-x","api_base":%q,"api_key":"sk-up"}`, up.URL+"/v1"), ""),
	})
	b.agents.SetConfig(map[string]*a2a.Agent{"ag": mustAgent(t, "ag", "ag", `{"model":"m"}`)})
	b.addKey("sk-m", "m")

	for _, tc := range []struct{ path, body, route string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"one two"}]}`, "chat"},
		{"/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two"}]}`, "chat"},
		{"/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"one two"}]}`, "messages"},
		{"/a2a/ag", sendRPC("message/send", "one two"), "a2a"},
		{"/a2a/ag", sendRPC("message/stream", "one two"), "a2a"},
	} {
		lim.reset()
		w := b.do(t, "sk-m", "POST", tc.path, tc.body)
		require.Equal(t, 200, w.Code, w.Body.String())
		infos, outs := lim.get()
		require.Len(t, infos, 1, tc.path)
		require.Equal(t, tc.route, infos[0].Route)
		require.Equal(t, "m", infos[0].Model)
		require.Equal(t, keys.Hash("sk-m"), infos[0].Key.Token)
		require.Len(t, outs, 1, "%s: Done once", tc.path)
		require.NoError(t, outs[0].Err)
		require.NotNil(t, outs[0].Deployment)
		require.Equal(t, "m", outs[0].Deployment.ModelID)
		require.Equal(t, int64(2), outs[0].Usage.PromptTokens, "%s: %+v", tc.path, outs[0].Usage)
		require.Positive(t, outs[0].Usage.CompletionTokens, tc.path)
	}

	// a refusal is answered as is; nothing is called
	lim.refuse = &api.Error{Status: 429, Type: "rate_limit_error", Message: "Rate limit exceeded"}
	up.Reset()
	w := b.do(t, "sk-m", "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	require.Equal(t, 429, w.Code)
	require.Equal(t, "rate_limit_error", gjson.Get(w.Body.String(), "error.type").Str)
	require.Empty(t, up.Requests())
}

type recordingAdmitter struct {
	mu     sync.Mutex
	infos  []api.CallInfo
	outs   []api.Outcome
	refuse error
}

func (r *recordingAdmitter) Admit(_ context.Context, c api.CallInfo) (api.Ticket, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse != nil {
		return nil, r.refuse
	}
	r.infos = append(r.infos, c)
	return ticketFunc(func(o api.Outcome) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.outs = append(r.outs, o)
	}), nil
}

func (r *recordingAdmitter) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.infos, r.outs = nil, nil
}

func (r *recordingAdmitter) get() ([]api.CallInfo, []api.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.CallInfo(nil), r.infos...), append([]api.Outcome(nil), r.outs...)
}

type ticketFunc func(api.Outcome)

func (f ticketFunc) Done(o api.Outcome) { f(o) }

var _ api.Admitter = (*recordingAdmitter)(nil)
