package itest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 21: translation between formats, each case provisioned on replica A and called on
// replica B with the official SDKs; the fake upstream records what it received.

func lastBody(t *testing.T, s *fakeupstream.Server, path string) gjson.Result {
	t.Helper()
	req, ok := s.LastRequest(path)
	require.True(t, ok, "no upstream request to %s", path)
	return gjson.ParseBytes(req.Body)
}

// Item 1: Claude Code on an openai/ deployment — a streamed /v1/messages?beta=true whose
// messages hold a role "system" turn: folded into the system prompt, not a 400.
func TestClaudeCodeSystemTurnOnOpenAI(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "cc-gpt", map[string]any{"model": "openai/gpt-4o", "api_base": up.URL + "/v1", "api_key": "sk-up"})
	an := anthropic.NewClient(aoption.WithBaseURL(p.B.URL), aoption.WithAPIKey(MasterKey), aoption.WithMaxRetries(0))
	var hr *http.Response
	st := an.Beta.Messages.NewStreaming(context.Background(), anthropic.BetaMessageNewParams{
		Model: "cc-gpt", MaxTokens: 64,
		System: []anthropic.BetaTextBlockParam{{Text: "You are Claude Code."}},
		Messages: []anthropic.BetaMessageParam{
			anthropic.NewBetaSystemMessage(anthropic.BetaSystemMessageOutputConfigParam{},
				anthropic.BetaSystemMessageParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: "# Environment\ncwd: /src"}}),
			anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("list the files")),
		},
	}, aoption.WithQuery("beta", "true"), aoption.WithResponseInto(&hr)) // as Claude Code sends it
	var msg anthropic.BetaMessage
	for st.Next() {
		require.NoError(t, msg.Accumulate(st.Current()))
	}
	require.NoError(t, st.Err())
	require.Equal(t, "fake reply to: list the files", msg.Content[0].Text)
	require.Equal(t, anthropic.BetaStopReasonEndTurn, msg.StopReason)
	req, _ := up.LastRequest("/v1/chat/completions")
	require.Equal(t, "beta=true", hr.Request.URL.RawQuery)
	body := gjson.ParseBytes(req.Body)
	msgs := body.Get("messages").Array()
	require.Len(t, msgs, 3, "%s", req.Body)
	require.Equal(t, "system", msgs[0].Get("role").Str)
	require.Equal(t, "You are Claude Code.", msgs[0].Get("content").Str)
	require.Equal(t, "system", msgs[1].Get("role").Str)
	require.Equal(t, "# Environment\ncwd: /src", msgs[1].Get("content").Str)
	require.Equal(t, "user", msgs[2].Get("role").Str)
}

// Item 2: Codex CLI on an anthropic/ deployment — a streamed /v1/responses with a namespace
// tool and web_search: the namespace is flattened (its call answered under the client's
// name and namespace), web_search with external_web_access false is dropped with the
// header, without it translated to Anthropic's web search server tool.
func TestCodexNamespaceAndHostedToolsOnAnthropic(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithToolCalls())
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "cx-claude", map[string]any{"model": "anthropic/claude-sonnet-4-5", "api_base": up.URL, "api_key": "sk-up-ant"})
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	spawn := map[string]any{"type": "function", "name": "spawn_agent", "description": "Spawn a sub-agent",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}}
	shell := map[string]any{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}
	tools := []any{
		map[string]any{"type": "namespace", "name": "multi_agent_v1", "description": "Agents", "tools": []any{spawn}},
		map[string]any{"type": "web_search", "external_web_access": false},
		shell,
	}
	var hr *http.Response
	st := oa.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "cx-claude",
		Instructions: openai.String("You are Codex."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("spawn a helper")}},
		option.WithJSONSet("tools", tools), option.WithJSONSet("store", false), option.WithResponseInto(&hr))
	var done *responses.Response
	var added []string
	for st.Next() {
		ev := st.Current()
		switch ev.Type {
		case "response.output_item.added":
			added = append(added, ev.RawJSON())
		case "response.completed":
			r := ev.Response
			done = &r
		}
	}
	require.NoError(t, st.Err())
	require.Equal(t, "tools.web_search", hr.Header.Get("x-lockstep-dropped"))
	body := lastBody(t, up, "/v1/messages")
	names := []string{}
	for _, tl := range body.Get("tools").Array() {
		names = append(names, tl.Get("name").Str)
	}
	require.Equal(t, []string{"multi_agent_v1__spawn_agent", "shell"}, names, "%s", body.Raw)
	require.Equal(t, "Spawn a sub-agent", body.Get("tools.0.description").Str)
	require.Equal(t, "You are Codex.", body.Get("system").Str)
	require.NotNil(t, done)
	require.Len(t, done.Output, 1)
	call := gjson.Parse(done.Output[0].RawJSON())
	require.Equal(t, "function_call", call.Get("type").Str)
	require.Equal(t, "spawn_agent", call.Get("name").Str, call.Raw)
	require.Equal(t, "multi_agent_v1", call.Get("namespace").Str, call.Raw)
	require.Len(t, added, 1)
	require.Equal(t, "multi_agent_v1", gjson.Get(added[0], "item.namespace").Str, added[0])

	// The call's result comes back under the client's names: flattened again upstream.
	up.Reset()
	_, err := oa.Responses.New(context.Background(), responses.ResponseNewParams{Model: "cx-claude"},
		option.WithJSONSet("tools", tools), option.WithJSONSet("input", []any{
			map[string]any{"type": "message", "role": "user", "content": "spawn a helper"},
			map[string]any{"type": "function_call", "call_id": "call_1", "namespace": "multi_agent_v1", "name": "spawn_agent", "arguments": `{"message":"x"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "spawned"},
		}))
	require.NoError(t, err)
	body = lastBody(t, up, "/v1/messages")
	require.Equal(t, "multi_agent_v1__spawn_agent", body.Get("messages.1.content.0.name").Str, body.Raw)

	// web_search with live access: Anthropic's web search server tool.
	plain := fakeupstream.Start(t)
	createModel(t, p.A, "cx-claude-ws", map[string]any{"model": "anthropic/claude-sonnet-4-5", "api_base": plain.URL, "api_key": "sk-up-ant"})
	hr = nil
	r, err := oa.Responses.New(context.Background(), responses.ResponseNewParams{Model: "cx-claude-ws",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("search the web")}},
		option.WithJSONSet("tools", []any{map[string]any{"type": "web_search", "user_location": map[string]any{"type": "approximate", "country": "DE"}}, shell}),
		option.WithResponseInto(&hr))
	require.NoError(t, err)
	require.Equal(t, "fake reply to: search the web", r.OutputText())
	require.Empty(t, hr.Header.Get("x-lockstep-dropped"))
	body = lastBody(t, plain, "/v1/messages")
	require.JSONEq(t, `{"type":"web_search_20250305","name":"web_search","user_location":{"type":"approximate","country":"DE"}}`, body.Get("tools.0").Raw)
}

// Item 3: structured output across formats. chat response_format → Anthropic: a model with
// structured outputs gets output_config.format, an older one the forced json_tool_call tool
// whose input the client receives as the message content (plain and streamed);
// /v1/responses text.format → Anthropic; /v1/messages output_config.format → OpenAI
// response_format.
func TestStructuredOutputAcrossFormats(t *testing.T) {
	t.Parallel()
	jsonReply := fakeupstream.WithReply(func(fakeupstream.ReplyInput) string { return `{"city":"Paris"}` })
	native := fakeupstream.Start(t, jsonReply)
	forced := fakeupstream.Start(t, fakeupstream.WithToolCalls())
	gpt := fakeupstream.Start(t, jsonReply)
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "so-native", map[string]any{"model": "anthropic/claude-sonnet-4-5-20250929", "api_base": native.URL, "api_key": "k"})
	createModel(t, p.A, "so-forced", map[string]any{"model": "anthropic/claude-3-5-sonnet-20241022", "api_base": forced.URL, "api_key": "k"})
	createModel(t, p.A, "so-gpt", map[string]any{"model": "openai/gpt-4o", "api_base": gpt.URL + "/v1", "api_key": "k"})
	ctx := context.Background()
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	an := anthropic.NewClient(aoption.WithBaseURL(p.B.URL), aoption.WithAPIKey(MasterKey), aoption.WithMaxRetries(0))
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}, "additionalProperties": false}
	wantSchema := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	rf := openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
		JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "city", Schema: schema, Strict: openai.Bool(true)}}}
	params := func(model string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: model, ResponseFormat: rf,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("capital of France")}}
	}

	cc, err := oa.Chat.Completions.New(ctx, params("so-native"))
	require.NoError(t, err)
	require.Equal(t, `{"city":"Paris"}`, cc.Choices[0].Message.Content)
	body := lastBody(t, native, "/v1/messages")
	require.JSONEq(t, `{"format":{"type":"json_schema","schema":`+wantSchema+`}}`, body.Get("output_config").Raw, body.Raw)
	require.False(t, body.Get("tools").Exists())

	var hr *http.Response
	cc, err = oa.Chat.Completions.New(ctx, params("so-forced"), option.WithJSONSet("seed", 7), option.WithResponseInto(&hr))
	require.NoError(t, err)
	require.Equal(t, "seed", hr.Header.Get("x-lockstep-dropped"), "nothing dropped silently")
	require.Equal(t, `{"input":"capital of France"}`, cc.Choices[0].Message.Content, "the forced tool's input is the content")
	require.Equal(t, "stop", cc.Choices[0].FinishReason)
	require.Empty(t, cc.Choices[0].Message.ToolCalls)
	body = lastBody(t, forced, "/v1/messages")
	require.JSONEq(t, `[{"name":"json_tool_call","input_schema":`+wantSchema+`}]`, body.Get("tools").Raw, body.Raw)
	require.JSONEq(t, `{"type":"tool","name":"json_tool_call"}`, body.Get("tool_choice").Raw)

	cs := oa.Chat.Completions.NewStreaming(ctx, params("so-forced"))
	var acc openai.ChatCompletionAccumulator
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	require.NoError(t, cs.Err())
	require.Equal(t, `{"input":"capital of France"}`, acc.Choices[0].Message.Content)
	require.Equal(t, "stop", acc.Choices[0].FinishReason)
	require.Empty(t, acc.Choices[0].Message.ToolCalls)

	r, err := oa.Responses.New(ctx, responses.ResponseNewParams{Model: "so-native",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("capital of France")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "city", Schema: schema}}}})
	require.NoError(t, err)
	require.Equal(t, `{"city":"Paris"}`, r.OutputText())
	body = lastBody(t, native, "/v1/messages")
	require.JSONEq(t, `{"format":{"type":"json_schema","schema":`+wantSchema+`}}`, body.Get("output_config").Raw, body.Raw)

	ms := an.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "so-gpt", MaxTokens: 64,
		OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schema}},
		Messages:     []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("capital of France"))}})
	var macc anthropic.Message
	for ms.Next() {
		require.NoError(t, macc.Accumulate(ms.Current()))
	}
	require.NoError(t, ms.Err())
	require.Equal(t, `{"city":"Paris"}`, macc.Content[0].Text)
	body = lastBody(t, gpt, "/v1/chat/completions")
	require.Equal(t, "json_schema", body.Get("response_format.type").Str, body.Raw)
	require.JSONEq(t, wantSchema, body.Get("response_format.json_schema.schema").Raw)
	require.NotEmpty(t, body.Get("response_format.json_schema.name").Str)
}

// Item 5: anthropic-beta reaches an Anthropic upstream on a real request (passed through and
// translated), and no client credential does.
func TestAnthropicBetaReachesUpstream(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "beta-claude", map[string]any{"model": "anthropic/claude-sonnet-4-5", "api_base": up.URL, "api_key": "sk-up-ant"})
	an := anthropic.NewClient(aoption.WithBaseURL(p.B.URL), aoption.WithAPIKey(MasterKey), aoption.WithMaxRetries(0),
		aoption.WithHeader("anthropic-beta", "context-1m-2025-08-07"))
	_, err := an.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "beta-claude", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	require.NoError(t, err)
	req, _ := up.LastRequest("/v1/messages")
	require.Equal(t, []string{"context-1m-2025-08-07"}, req.Header.Values("anthropic-beta"))
	require.Equal(t, "sk-up-ant", req.Header.Get("x-api-key"))
	require.Empty(t, req.Header.Get("Authorization"))

	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0),
		option.WithHeader("anthropic-beta", "interleaved-thinking-2025-05-14"))
	cs := oa.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "beta-claude",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for cs.Next() {
	}
	require.NoError(t, cs.Err())
	req, _ = up.LastRequest("/v1/messages")
	require.Equal(t, "interleaved-thinking-2025-05-14", req.Header.Get("anthropic-beta"))
	require.True(t, strings.HasPrefix(req.Header.Get("x-api-key"), "sk-up"))
	require.Empty(t, req.Header.Get("Authorization"))
}
