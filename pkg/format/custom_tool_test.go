package format

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestCustomToolTranslation(t *testing.T) {
	t.Parallel()
	r, err := parseResponsesRequest([]byte(`{"model":"g","input":[
		{"type":"message","role":"user","content":"patch it"},
		{"type":"custom_tool_call","call_id":"c1","name":"apply_patch","input":"*** Begin Patch\n\"q\"\n*** End Patch"},
		{"type":"custom_tool_call_output","call_id":"c1","output":"ok"}],
		"tools":[{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},
		{"type":"custom","name":"free","format":{"type":"text"}}],
		"tool_choice":{"type":"custom","name":"apply_patch"}}`))
	require.NoError(t, err)
	require.Empty(t, r.dropped)
	require.Equal(t, map[string]bool{"apply_patch": true, "free": true}, r.custom)
	require.Equal(t, "Edit files.\n\nFormat:\n```lark\nstart: x\n```", r.tools[0].description)
	require.Equal(t, "", r.tools[1].description, "a text format adds nothing")
	require.JSONEq(t, `{"type":"object","properties":{"content":{"type":"string","description":"The free content following the specified format"}},"required":["content"]}`, r.tools[1].schema)
	require.Equal(t, toolChoice{mode: "tool", name: "apply_patch"}, r.choice)
	use := r.messages[1].parts[0]
	require.Equal(t, partToolUse, use.kind)
	require.Equal(t, "*** Begin Patch\n\"q\"\n*** End Patch", gjson.Get(use.args, "content").Str)
	require.Equal(t, partToolResult, r.messages[2].parts[0].kind)

	// the answer: a call of a custom tool is a custom_tool_call item with the freeform input
	res := &result{blocks: []block{{tool: true, id: "c2", name: "apply_patch", args: `{"content":"diff"}`}, {tool: true, id: "c3", name: "other", args: `{}`}}, stop: stopTool}
	r.Fixes().fixResult(res)
	out := gjson.ParseBytes(renderResponses(res, 1))
	require.Equal(t, "custom_tool_call", out.Get("output.0.type").Str, out.Raw)
	require.Equal(t, "diff", out.Get("output.0.input").Str)
	require.False(t, out.Get("output.0.arguments").Exists())
	require.Equal(t, "function_call", out.Get("output.1.type").Str)

	// arguments that are not {"content": …} come back as they were
	require.Equal(t, "not json", customInput("not json"))
	require.Equal(t, `{"x":1}`, customInput(`{"x":1}`))
	require.Equal(t, `["a"]`, customInput(`{"content":["a"]}`))
}
