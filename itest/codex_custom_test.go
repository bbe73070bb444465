package itest

import (
	"context"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 21: Codex's freeform apply_patch tool ({"type": "custom", "format": {grammar}}) on
// an anthropic/ deployment, streamed and plain: it goes upstream as a function tool with one
// string parameter "content" (its grammar in the description), and the model's call comes back
// as a custom_tool_call item with the freeform input, as LiteLLM's responses bridge does; the
// next turn's custom_tool_call and custom_tool_call_output go upstream as tool_use and
// tool_result. Created on A, used on B.
func TestCodexCustomToolOnAnthropic(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithToolCalls())
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "cx-custom", map[string]any{"model": "anthropic/claude-sonnet-4-5", "api_base": up.URL, "api_key": "sk-up-ant"})
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	const patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
	tools := []any{map[string]any{"type": "custom", "name": "apply_patch", "description": "Use the `apply_patch` tool to edit files.",
		"format": map[string]any{"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}}}

	var hr *http.Response
	st := oa.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "cx-custom",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(patch)}},
		option.WithJSONSet("tools", tools), option.WithJSONSet("tool_choice", map[string]any{"type": "custom", "name": "apply_patch"}),
		option.WithResponseInto(&hr))
	var done *responses.Response
	var events []string
	var inputDone string
	for st.Next() {
		ev := st.Current()
		events = append(events, ev.Type)
		switch ev.Type {
		case "response.custom_tool_call_input.done":
			inputDone = gjson.Get(ev.RawJSON(), "input").Str
		case "response.completed":
			r := ev.Response
			done = &r
		}
	}
	require.NoError(t, st.Err())
	require.Empty(t, hr.Header.Get("x-lockstep-dropped"), "nothing dropped")
	body := lastBody(t, up, "/v1/messages")
	require.Equal(t, "apply_patch", body.Get("tools.0.name").Str, body.Raw)
	require.Equal(t, "Use the `apply_patch` tool to edit files.\n\nFormat:\n```lark\nstart: begin_patch hunk+ end_patch\n```", body.Get("tools.0.description").Str)
	require.JSONEq(t, `{"type":"object","properties":{"content":{"type":"string","description":"The apply_patch content following the specified format"}},"required":["content"]}`, body.Get("tools.0.input_schema").Raw)
	require.JSONEq(t, `{"type":"tool","name":"apply_patch"}`, body.Get("tool_choice").Raw)
	require.Contains(t, events, "response.custom_tool_call_input.delta")
	require.NotContains(t, events, "response.function_call_arguments.delta")
	require.Equal(t, patch, inputDone)
	require.NotNil(t, done)
	require.Len(t, done.Output, 1)
	call := gjson.Parse(done.Output[0].RawJSON())
	require.Equal(t, "custom_tool_call", call.Get("type").Str, call.Raw)
	require.Equal(t, "apply_patch", call.Get("name").Str)
	require.Equal(t, patch, call.Get("input").Str)
	require.False(t, call.Get("arguments").Exists(), call.Raw)
	callID := call.Get("call_id").Str
	require.NotEmpty(t, callID)

	// Plain: the same item; then the patch's result goes back upstream as tool_use/tool_result.
	r, err := oa.Responses.New(context.Background(), responses.ResponseNewParams{Model: "cx-custom",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(patch)}}, option.WithJSONSet("tools", tools))
	require.NoError(t, err)
	require.Len(t, r.Output, 1)
	item := gjson.Parse(r.Output[0].RawJSON())
	require.Equal(t, "custom_tool_call", item.Get("type").Str, item.Raw)
	require.Equal(t, patch, item.Get("input").Str)

	up.Reset()
	r, err = oa.Responses.New(context.Background(), responses.ResponseNewParams{Model: "cx-custom"},
		option.WithJSONSet("tools", tools), option.WithJSONSet("input", []any{
			map[string]any{"type": "message", "role": "user", "content": "add a.txt"},
			map[string]any{"type": "custom_tool_call", "call_id": callID, "name": "apply_patch", "input": patch},
			map[string]any{"type": "custom_tool_call_output", "call_id": callID, "output": "Done!"},
		}))
	require.NoError(t, err)
	require.NotEmpty(t, r.OutputText())
	body = lastBody(t, up, "/v1/messages")
	use := body.Get("messages.1.content.0")
	require.Equal(t, "tool_use", use.Get("type").Str, body.Raw)
	require.Equal(t, callID, use.Get("id").Str)
	require.JSONEq(t, `{"content":`+mustJSON(t, patch)+`}`, use.Get("input").Raw)
	res := body.Get("messages.2.content.0")
	require.Equal(t, "tool_result", res.Get("type").Str, body.Raw)
	require.Equal(t, callID, res.Get("tool_use_id").Str)
	require.Equal(t, "Done!", contentText(res.Get("content")))
}
