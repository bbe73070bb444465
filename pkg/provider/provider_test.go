package provider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/provider"
)

// upstreamKinds are the deployments every inbound format is tested against.
var upstreamKinds = []string{"openai", "anthropic", "mock", "deepseek"}

const mockText = "hello from the mock deployment"

// deployment builds a deployment of the given kind pointing at the fake upstream s.
// "deepseek" is an OpenAI-compatible provider without a native /responses (translated to chat).
func deployment(t testing.TB, s *fakeupstream.Server, kind string, extra string) *provider.Deployment {
	t.Helper()
	var params string
	switch kind {
	case "openai":
		params = fmt.Sprintf(`{"model":"openai/gpt-up","api_key":"sk-up-openai","api_base":%q%s}`, s.URL+"/v1", extra)
	case "anthropic":
		params = fmt.Sprintf(`{"model":"anthropic/claude-up","api_key":"sk-up-ant","api_base":%q%s}`, s.URL, extra)
	case "deepseek":
		params = fmt.Sprintf(`{"model":"deepseek/ds-up","api_key":"sk-up-ds","api_base":%q%s}`, s.URL+"/v1", extra)
	case "mock":
		params = fmt.Sprintf(`{"model":"openai/gpt-mock","mock_response":%q%s}`, mockText, extra)
	default:
		t.Fatalf("unknown kind %s", kind)
	}
	d, err := provider.NewDeployment("id-"+kind, "group-"+kind, []byte(params))
	require.NoError(t, err)
	return d
}

func wantText(kind, user string) string {
	if kind == "mock" {
		return mockText
	}
	return "fake reply to: " + user
}

// gateway is a minimal stand-in for pkg/api: it serves the four LLM routes on one deployment
// with provider.Client, so the official SDKs can be pointed at the translated output.
func gateway(t testing.TB, d *provider.Deployment) string {
	t.Helper()
	c := provider.NewClient()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, ok := format.FormatForPath(r.URL.Path)
		if !ok {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if format.StreamRequested(body) {
			st, err := c.Stream(r.Context(), d, in, body)
			if err != nil {
				writeError(w, in, err)
				return
			}
			defer st.Close()
			w.Header().Set("Content-Type", "text/event-stream")
			for {
				ev, err := st.Next()
				if err == io.EOF {
					return
				}
				if err != nil {
					var ue *format.UpstreamError
					var re *format.RequestError
					status, msg := 500, err.Error()
					if errors.As(err, &ue) {
						status, msg = ue.Status, ue.Message
					} else if errors.As(err, &re) {
						status, msg = re.Status(), re.Message
					}
					_, _ = w.Write(format.ErrorEvent(in, status, msg))
					return
				}
				_, _ = w.Write(ev.Data)
				w.(http.Flusher).Flush()
			}
		}
		res, err := c.Do(r.Context(), d, in, body)
		if err != nil {
			writeError(w, in, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(res.Status)
		_, _ = w.Write(res.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeError(w http.ResponseWriter, in format.Format, err error) {
	var ue *format.UpstreamError
	var re *format.RequestError
	status, msg := 500, err.Error()
	if errors.As(err, &ue) {
		status, msg = ue.Status, ue.Message
	} else if errors.As(err, &re) {
		status, msg = re.Status(), re.Message
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if in == format.FormatMessages {
		fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":%q}}`, msg)
		return
	}
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"api_error","param":null,"code":"%d"}}`, msg, status)
}

func openaiSDK(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("sk-client"), option.WithMaxRetries(0))
}

func anthropicSDK(base string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(base+"/"), aoption.WithAPIKey("sk-client"), aoption.WithMaxRetries(0))
}

// TestSDKMatrix drives every inbound format through every kind of deployment with the
// official SDKs, streaming and not, and checks what they parse.
func TestSDKMatrix(t *testing.T) {
	t.Parallel()
	for _, kind := range upstreamKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := fakeupstream.Start(t, fakeupstream.WithStreamChunks(3))
			d := deployment(t, s, kind, "")
			gw := gateway(t, d)
			ctx := context.Background()
			oc, ac := openaiSDK(gw), anthropicSDK(gw)

			t.Run("chat", func(t *testing.T) {
				res, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
					Model:    "group",
					Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello chat")},
				})
				require.NoError(t, err)
				require.Equal(t, wantText(kind, "hello chat"), res.Choices[0].Message.Content)
				require.Equal(t, "stop", res.Choices[0].FinishReason)
				require.Positive(t, res.Usage.PromptTokens)
				require.Positive(t, res.Usage.CompletionTokens)
			})
			t.Run("chat_stream", func(t *testing.T) {
				stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
					Model:         "group",
					Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello stream")},
					StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
				})
				acc := openai.ChatCompletionAccumulator{}
				deltas := 0
				for stream.Next() {
					chunk := stream.Current()
					require.True(t, acc.AddChunk(chunk))
					if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
						deltas++
					}
				}
				require.NoError(t, stream.Err())
				require.Equal(t, wantText(kind, "hello stream"), acc.Choices[0].Message.Content)
				require.Equal(t, "stop", acc.Choices[0].FinishReason)
				require.Greater(t, deltas, 1)
				require.Positive(t, acc.Usage.CompletionTokens)
			})
			t.Run("responses", func(t *testing.T) {
				res, err := oc.Responses.New(ctx, responses.ResponseNewParams{
					Model:        "group",
					Instructions: openai.String("be brief"),
					Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello responses")},
				})
				require.NoError(t, err)
				require.Equal(t, wantText(kind, "hello responses"), res.OutputText())
				require.Equal(t, responses.ResponseStatusCompleted, res.Status)
				require.Positive(t, res.Usage.OutputTokens)
			})
			t.Run("responses_stream", func(t *testing.T) {
				stream := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{
					Model: "group",
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello rstream")},
				})
				var types []string
				var deltas []string
				var final responses.Response
				seq := int64(-1)
				for stream.Next() {
					ev := stream.Current()
					require.Equal(t, seq+1, ev.SequenceNumber, "sequence numbers")
					seq = ev.SequenceNumber
					types = append(types, ev.Type)
					switch ev.Type {
					case "response.output_text.delta":
						deltas = append(deltas, ev.Delta)
					case "response.completed":
						final = ev.Response
					}
				}
				require.NoError(t, stream.Err())
				require.Equal(t, "response.created", types[0])
				require.Equal(t, "response.completed", types[len(types)-1])
				require.Contains(t, types, "response.output_item.added")
				require.Contains(t, types, "response.output_item.done")
				require.Greater(t, len(deltas), 1)
				require.Equal(t, wantText(kind, "hello rstream"), strings.Join(deltas, ""))
				require.Equal(t, wantText(kind, "hello rstream"), final.OutputText())
			})
			msgParams := anthropic.MessageNewParams{
				Model:     "group",
				MaxTokens: 256,
				System:    []anthropic.TextBlockParam{{Text: "be brief"}},
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello messages"))},
			}
			t.Run("messages", func(t *testing.T) {
				msg, err := ac.Messages.New(ctx, msgParams)
				require.NoError(t, err)
				require.Len(t, msg.Content, 1)
				require.Equal(t, wantText(kind, "hello messages"), msg.Content[0].Text)
				require.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
				require.Positive(t, msg.Usage.OutputTokens)
			})
			t.Run("messages_stream", func(t *testing.T) {
				stream := ac.Messages.NewStreaming(ctx, msgParams)
				acc := anthropic.Message{}
				var types []string
				for stream.Next() {
					ev := stream.Current()
					types = append(types, ev.Type)
					require.NoError(t, acc.Accumulate(ev))
				}
				require.NoError(t, stream.Err())
				require.Equal(t, "message_start", types[0])
				require.Equal(t, "message_stop", types[len(types)-1])
				require.Equal(t, wantText(kind, "hello messages"), acc.Content[0].Text)
				require.Equal(t, anthropic.StopReasonEndTurn, acc.StopReason)
				require.Positive(t, acc.Usage.OutputTokens)
			})
			t.Run("embeddings", func(t *testing.T) {
				res, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{
					Model: "group",
					Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
				})
				if kind == "anthropic" {
					var oerr *openai.Error
					require.True(t, errors.As(err, &oerr), "err: %v", err)
					require.Equal(t, 400, oerr.StatusCode)
					require.Contains(t, oerr.Message, "embeddings not supported by provider anthropic")
					return
				}
				require.NoError(t, err)
				require.Len(t, res.Data, 2)
				if kind != "mock" {
					require.Equal(t, fakeupstream.Vector("a", 8), res.Data[0].Embedding)
				}
				require.Len(t, res.Data[1].Embedding, 8)
			})

			// Every upstream request carried the deployment's model and auth, on the right path.
			for _, req := range s.Requests() {
				switch kind {
				case "anthropic":
					require.Equal(t, "/v1/messages", req.Path)
					require.Equal(t, "sk-up-ant", req.Header.Get("x-api-key"))
					require.Equal(t, "2023-06-01", req.Header.Get("anthropic-version"))
					require.Equal(t, "claude-up", gjson.GetBytes(req.Body, "model").Str)
				case "openai":
					require.Equal(t, "Bearer sk-up-openai", req.Header.Get("Authorization"))
					require.Equal(t, "gpt-up", gjson.GetBytes(req.Body, "model").Str)
				case "deepseek":
					require.NotEqual(t, "/v1/responses", req.Path, "deepseek has no /responses: translated to chat")
					require.Equal(t, "Bearer sk-up-ds", req.Header.Get("Authorization"))
					require.Equal(t, "ds-up", gjson.GetBytes(req.Body, "model").Str)
				}
			}
			if kind == "mock" {
				require.Empty(t, s.Requests())
			}
		})
	}
}

// TestToolCallsTranslated checks tool calls through the translating pairs, both ways, with
// the official SDKs.
func TestToolCallsTranslated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, kind := range []string{"openai", "anthropic", "deepseek"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := fakeupstream.Start(t, fakeupstream.WithToolCalls(), fakeupstream.WithStreamChunks(3))
			gw := gateway(t, deployment(t, s, kind, ""))
			oc, ac := openaiSDK(gw), anthropicSDK(gw)

			chatParams := openai.ChatCompletionNewParams{
				Model:    "group",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris")},
				Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
					Name: "get_weather", Description: openai.String("weather"), Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"input": map[string]any{"type": "string"}}},
				})},
			}
			res, err := oc.Chat.Completions.New(ctx, chatParams)
			require.NoError(t, err)
			require.Equal(t, "tool_calls", res.Choices[0].FinishReason)
			require.Len(t, res.Choices[0].Message.ToolCalls, 1)
			call := res.Choices[0].Message.ToolCalls[0]
			require.Equal(t, "get_weather", call.Function.Name)
			require.JSONEq(t, `{"input":"weather in Paris"}`, call.Function.Arguments)
			require.NotEmpty(t, call.ID)

			stream := oc.Chat.Completions.NewStreaming(ctx, chatParams)
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				require.True(t, acc.AddChunk(stream.Current()))
			}
			require.NoError(t, stream.Err())
			require.Equal(t, "tool_calls", acc.Choices[0].FinishReason)
			require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
			require.JSONEq(t, `{"input":"weather in Paris"}`, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)

			// The follow-up turn with the tool result goes through and gets text back.
			follow := chatParams
			follow.Messages = append(follow.Messages, res.Choices[0].Message.ToParam(), openai.ToolMessage("18C and sunny", call.ID))
			res2, err := oc.Chat.Completions.New(ctx, follow)
			require.NoError(t, err)
			require.Equal(t, "stop", res2.Choices[0].FinishReason)

			msgParams := anthropic.MessageNewParams{
				Model:     "group",
				MaxTokens: 100,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather?"))},
				Tools:     []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"input": map[string]any{"type": "string"}}}}}},
			}
			msg, err := ac.Messages.New(ctx, msgParams)
			require.NoError(t, err)
			require.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
			require.Equal(t, "tool_use", msg.Content[0].Type)
			require.Equal(t, "get_weather", msg.Content[0].Name)
			require.JSONEq(t, `{"input":"weather?"}`, string(msg.Content[0].Input))

			mstream := ac.Messages.NewStreaming(ctx, msgParams)
			macc := anthropic.Message{}
			for mstream.Next() {
				require.NoError(t, macc.Accumulate(mstream.Current()))
			}
			require.NoError(t, mstream.Err())
			require.Equal(t, anthropic.StopReasonToolUse, macc.StopReason)
			require.JSONEq(t, `{"input":"weather?"}`, string(macc.Content[0].Input))

			respParams := responses.ResponseNewParams{
				Model: "group",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather now")},
				Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: map[string]any{"type": "object"}}}},
			}
			rres, err := oc.Responses.New(ctx, respParams)
			require.NoError(t, err)
			require.Len(t, rres.Output, 1)
			require.Equal(t, "function_call", rres.Output[0].Type)
			require.Equal(t, "get_weather", rres.Output[0].Name)
			require.JSONEq(t, `{"input":"weather now"}`, rres.Output[0].Arguments.OfString)

			rstream := oc.Responses.NewStreaming(ctx, respParams)
			var args strings.Builder
			var final responses.Response
			for rstream.Next() {
				ev := rstream.Current()
				switch ev.Type {
				case "response.function_call_arguments.delta":
					args.WriteString(ev.Delta)
				case "response.completed":
					final = ev.Response
				}
			}
			require.NoError(t, rstream.Err())
			require.JSONEq(t, `{"input":"weather now"}`, args.String())
			require.Equal(t, "function_call", final.Output[0].Type)
		})
	}
}

func TestPassthroughRequestBytes(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t)
	c := provider.NewClient()
	ctx := context.Background()
	cases := []struct {
		kind string
		in   format.Format
		path string
		body string
		want string
	}{
		{"openai", format.FormatChat, "/v1/chat/completions",
			`{ "messages": [{"role":"user","content":"hi"}],  "model" : "group", "x_unknown": {"keep": [1, 2.50, "é\u00e9"]}, "temperature":0.7 }`,
			`{ "messages": [{"role":"user","content":"hi"}],  "model" : "gpt-up", "x_unknown": {"keep": [1, 2.50, "é\u00e9"]}, "temperature":0.7 }`},
		{"openai", format.FormatResponses, "/v1/responses",
			`{"model":"group","input":"hi","reasoning":{"effort":"low"},"store":false}`,
			`{"model":"gpt-up","input":"hi","reasoning":{"effort":"low"},"store":false}`},
		{"openai", format.FormatEmbeddings, "/v1/embeddings",
			`{"input":["x"],"model":"group","dimensions":3}`,
			`{"input":["x"],"model":"gpt-up","dimensions":3}`},
		{"anthropic", format.FormatMessages, "/v1/messages",
			`{"model":"group","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024},"metadata":{"user_id":"u"}}`,
			`{"model":"claude-up","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024},"metadata":{"user_id":"u"}}`},
	}
	for _, tc := range cases {
		d := deployment(t, s, tc.kind, "")
		_, err := c.Do(ctx, d, tc.in, []byte(tc.body))
		require.NoError(t, err, tc.path)
		req, ok := s.LastRequest(tc.path)
		require.True(t, ok, tc.path)
		require.Equal(t, tc.want, string(req.Body), tc.path)
	}
}

// TestPassthroughAnswerBytes checks that answers pass through verbatim and that streamed
// frames are forwarded one by one as they arrive (no buffering of the whole stream).
func TestPassthroughAnswerBytes(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi <b>&</b>"},"finish_reason":"stop"}],"x_vendor":{"a":1}}`
	frames := []string{
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"one\"}}],\"x\":1}\n\n",
		": keep-alive comment\n\n",
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"two\"}}]}\r\n\r\n",
		"data: [DONE]\n\n",
	}
	gate := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !format.StreamRequested(body) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, f := range frames {
			_, _ = io.WriteString(w, f)
			w.(http.Flusher).Flush()
			if i == 0 {
				<-gate // the client must see frame 0 before frame 1 is even written
			}
		}
	}))
	t.Cleanup(up.Close)
	d, err := provider.NewDeployment("id", "g", []byte(`{"model":"openai/m","api_key":"k","api_base":"`+up.URL+`"}`))
	require.NoError(t, err)
	c := provider.NewClient()

	res, err := c.Do(context.Background(), d, format.FormatChat, []byte(`{"model":"g","messages":[]}`))
	require.NoError(t, err)
	require.Equal(t, answer, string(res.Body))
	require.Equal(t, "hi <b>&</b>", res.Text())

	st, err := c.Stream(context.Background(), d, format.FormatChat, []byte(`{"model":"g","messages":[],"stream":true}`))
	require.NoError(t, err)
	defer st.Close()
	var got []string
	var text strings.Builder
	for {
		ev, err := st.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if len(got) == 0 {
			close(gate)
		}
		got = append(got, string(ev.Data))
		text.WriteString(ev.Text)
	}
	require.Equal(t, frames, got)
	require.Equal(t, "onetwo", text.String())
}

func TestTranslatedRequestShapes(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t)
	c := provider.NewClient()
	ctx := context.Background()

	// chat → anthropic: system out of messages, max_tokens default, tool turns as blocks,
	// stop → stop_sequences, image data URL → base64 source.
	_, err := c.Do(ctx, deployment(t, s, "anthropic", ""), format.FormatChat, []byte(`{
		"model":"group","temperature":0.2,"stop":"END","user":"u1",
		"messages":[
			{"role":"system","content":"sys one"},
			{"role":"developer","content":[{"type":"text","text":"sys two"}]},
			{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"result"},
			{"role":"user","content":"thanks"}],
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],
		"tool_choice":"required","parallel_tool_calls":false}`))
	require.NoError(t, err)
	req, _ := s.LastRequest("/v1/messages")
	require.JSONEq(t, `{
		"model":"claude-up","max_tokens":4096,
		"system":[{"type":"text","text":"sys one"},{"type":"text","text":"sys two"}],
		"messages":[
			{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"f","input":{"a":1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"result"},{"type":"text","text":"thanks"}]}],
		"temperature":0.2,"stop_sequences":["END"],
		"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],
		"tool_choice":{"type":"any","disable_parallel_tool_use":true},
		"metadata":{"user_id":"u1"}}`, string(req.Body))

	// messages → openai chat: system message first, tool_result → tool message, max_tokens →
	// max_completion_tokens (OpenAI), stream asks for usage.
	st, err := c.Stream(ctx, deployment(t, s, "openai", ""), format.FormatMessages, []byte(`{
		"model":"group","max_tokens":77,"system":"be nice","stream":true,"stop_sequences":["X"],"top_k":5,
		"messages":[
			{"role":"user","content":"q"},
			{"role":"assistant","content":[{"type":"text","text":"let me see"},{"type":"tool_use","id":"tu_1","name":"f","input":{"b":2}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_1","content":[{"type":"text","text":"r"}]},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}],
		"tools":[{"name":"f","input_schema":{"type":"object"}}],
		"tool_choice":{"type":"tool","name":"f"}}`))
	require.NoError(t, err)
	for {
		if _, err := st.Next(); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	require.NoError(t, st.Close())
	req, _ = s.LastRequest("/v1/chat/completions")
	require.JSONEq(t, `{
		"model":"gpt-up",
		"messages":[
			{"role":"system","content":"be nice"},
			{"role":"user","content":"q"},
			{"role":"assistant","content":"let me see","tool_calls":[{"id":"tu_1","type":"function","function":{"name":"f","arguments":"{\"b\":2}"}}]},
			{"role":"tool","tool_call_id":"tu_1","content":"r"},
			{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}],
		"max_completion_tokens":77,"stop":["X"],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
		"tool_choice":{"type":"function","function":{"name":"f"}},
		"stream":true,"stream_options":{"include_usage":true}}`, string(req.Body))

	// responses → anthropic: instructions + developer items → system, function_call items.
	_, err = c.Do(ctx, deployment(t, s, "anthropic", ""), format.FormatResponses, []byte(`{
		"model":"group","instructions":"inst","max_output_tokens":50,
		"input":[
			{"role":"developer","content":"dev"},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
			{"type":"function_call_output","call_id":"c1","output":"out"}]}`))
	require.NoError(t, err)
	req, _ = s.LastRequest("/v1/messages")
	require.JSONEq(t, `{
		"model":"claude-up","max_tokens":50,
		"system":[{"type":"text","text":"inst"},{"type":"text","text":"dev"}],
		"messages":[
			{"role":"user","content":[{"type":"text","text":"hi"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"out"}]}]}`, string(req.Body))

	// What cannot be translated is refused before any call.
	_, err = c.Do(ctx, deployment(t, s, "anthropic", ""), format.FormatResponses, []byte(`{"model":"group","input":"x","previous_response_id":"resp_1"}`))
	var ue *format.RequestError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 400, ue.Status())
	require.Contains(t, ue.Message, "previous_response_id")
}

func TestUpstreamErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := provider.NewClient()
	body := []byte(`{"model":"group","messages":[{"role":"user","content":"x"}]}`)

	for _, tc := range []struct {
		status    int
		retryable bool
	}{{429, true}, {500, true}, {503, true}, {400, false}, {401, false}, {404, false}} {
		s := fakeupstream.Start(t, fakeupstream.WithStatus(tc.status), fakeupstream.WithErrorMessage("boom "+fmt.Sprint(tc.status)))
		for _, kind := range []string{"openai", "anthropic"} {
			_, err := c.Do(ctx, deployment(t, s, kind, ""), format.FormatChat, body)
			var ue *format.UpstreamError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tc.status, ue.Status)
			require.Equal(t, tc.retryable, ue.Retryable)
			require.Equal(t, tc.retryable, provider.IsRetryable(err))
			require.Equal(t, "boom "+fmt.Sprint(tc.status), ue.Message)
			require.NotEmpty(t, ue.Body)

			// Streams fail before the first event, so the caller can still retry.
			_, err = c.Stream(ctx, deployment(t, s, kind, ""), format.FormatMessages, []byte(`{"model":"g","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"x"}]}`))
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tc.status, ue.Status)
		}
	}

	// Transport failure: nothing listens.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	d, err := provider.NewDeployment("id", "g", []byte(`{"model":"openai/m","api_key":"k","api_base":"`+dead.URL+`"}`))
	require.NoError(t, err)
	_, err = c.Do(ctx, d, format.FormatChat, body)
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 502, ue.Status)
	require.True(t, ue.Retryable)

	// Mock errors, LiteLLM style.
	d, err = provider.NewDeployment("id", "g", []byte(`{"model":"openai/m","mock_response":"litellm.RateLimitError"}`))
	require.NoError(t, err)
	_, err = c.Do(ctx, d, format.FormatChat, body)
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 429, ue.Status)
	require.True(t, ue.Retryable)
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := provider.NewClient()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) }) // runs first: cleanups are LIFO
	d, err := provider.NewDeployment("id", "g", []byte(`{"model":"openai/m","api_key":"k","timeout":0.1,"api_base":"`+slow.URL+`"}`))
	require.NoError(t, err)
	_, err = c.Do(ctx, d, format.FormatChat, []byte(`{"model":"g","messages":[]}`))
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 504, ue.Status)
	require.True(t, ue.Retryable)
	_, err = c.Stream(ctx, d, format.FormatChat, []byte(`{"model":"g","messages":[],"stream":true}`))
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 504, ue.Status)

	// Idle timeout between frames: frames every 300 ms, stream_timeout 100 ms.
	s := fakeupstream.Start(t, fakeupstream.WithChunkDelay(300*time.Millisecond))
	d = deployment(t, s, "anthropic", `,"stream_timeout":0.1`)
	st, err := c.Stream(ctx, d, format.FormatChat, []byte(`{"model":"g","stream":true,"messages":[{"role":"user","content":"x y z"}]}`))
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Next() // message_start → role chunk
	require.NoError(t, err)
	_, err = st.Next()
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 504, ue.Status)

	// The caller giving up is reported as its context error, not as an upstream failure.
	cctx, cancel := context.WithCancel(ctx)
	d = deployment(t, s, "openai", "")
	st, err = c.Stream(cctx, d, format.FormatChat, []byte(`{"model":"g","stream":true,"messages":[{"role":"user","content":"x y z"}]}`))
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Next()
	require.NoError(t, err)
	cancel()
	_, err = st.Next()
	require.ErrorIs(t, err, context.Canceled)
}

func TestMockStreamChunks(t *testing.T) {
	t.Parallel()
	d, err := provider.NewDeployment("id", "g", []byte(`{"model":"anthropic/claude-x","mock_response":"one two three four five six"}`))
	require.NoError(t, err)
	require.True(t, d.IsMock())
	st, err := provider.NewClient().Stream(context.Background(), d, format.FormatChat, []byte(`{"model":"g","stream":true,"messages":[]}`))
	require.NoError(t, err)
	var deltas []string
	var raw strings.Builder
	for {
		ev, err := st.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		raw.Write(ev.Data)
		if ev.Text != "" {
			deltas = append(deltas, ev.Text)
		}
	}
	require.Len(t, deltas, 4)
	require.Equal(t, "one two three four five six", strings.Join(deltas, ""))
	require.True(t, strings.HasSuffix(raw.String(), "data: [DONE]\n\n"))
	require.NotContains(t, raw.String(), `"usage"`, "no usage chunk unless stream_options.include_usage")
}

func TestErrorEventParsesInSDKs(t *testing.T) {
	t.Parallel()
	for _, in := range []format.Format{format.FormatChat, format.FormatMessages, format.FormatResponses} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(format.ErrorEvent(in, 529, "upstream overloaded"))
		}))
		t.Cleanup(srv.Close)
		ctx := context.Background()
		switch in {
		case format.FormatChat:
			oc := openaiSDK(srv.URL)
			st := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
			for st.Next() {
			}
			require.ErrorContains(t, st.Err(), "upstream overloaded")
		case format.FormatMessages:
			ac := anthropicSDK(srv.URL)
			st := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 1, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
			for st.Next() {
			}
			require.Error(t, st.Err())
			require.Contains(t, st.Err().Error(), "overloaded")
		case format.FormatResponses:
			oc := openaiSDK(srv.URL)
			st := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
			var got responses.ResponseStreamEventUnion
			for st.Next() {
				got = st.Current()
			}
			require.NoError(t, st.Err())
			require.Equal(t, "error", got.Type)
			require.Equal(t, "upstream overloaded", got.Message)
			require.Equal(t, "529", got.Code)
		}
	}
}

// An upstream dying mid-stream surfaces as a retryable 502 from Next, after the frames that
// did arrive.
func TestStreamCutMidway(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t, fakeupstream.WithStreamCutAfter(3))
	c := provider.NewClient()
	for _, kind := range []string{"openai", "anthropic"} {
		st, err := c.Stream(context.Background(), deployment(t, s, kind, ""), format.FormatChat,
			[]byte(`{"model":"g","stream":true,"messages":[{"role":"user","content":"a b c d e"}]}`))
		require.NoError(t, err)
		events := 0
		for {
			_, err = st.Next()
			if err != nil {
				break
			}
			events++
		}
		require.NoError(t, st.Close())
		require.Positive(t, events, kind)
		var ue *format.UpstreamError
		require.ErrorAs(t, err, &ue, kind)
		require.Equal(t, 502, ue.Status)
		require.True(t, ue.Retryable)
	}
}

func TestAnthropicBetaForwarded(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t)
	c := provider.NewClient()
	h := http.Header{}
	h.Set("anthropic-beta", "context-1m-2025-08-07")
	h.Set("Authorization", "Bearer client-key")
	_, err := c.DoWith(context.Background(), deployment(t, s, "anthropic", ""), format.FormatMessages, []byte(`{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`), provider.Headers{In: h})
	require.NoError(t, err)
	req, _ := s.LastRequest("/v1/messages")
	require.Equal(t, "context-1m-2025-08-07", req.Header.Get("anthropic-beta"))
	require.Equal(t, "sk-up-ant", req.Header.Get("x-api-key"))
	require.Empty(t, req.Header.Get("Authorization"), "client auth is never forwarded")
}
