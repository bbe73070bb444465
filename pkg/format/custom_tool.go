package format

import (
	"github.com/tidwall/gjson"
)

// Responses "custom" tools (freeform tools such as Codex's apply_patch:
// {"type": "custom", "name", "description"?, "format": {"type": "grammar", "syntax",
// "definition"} | {"type": "text"}}) for an upstream without the Responses API, as LiteLLM's
// responses→completion bridge carries them (litellm/responses/litellm_completion_transformation/
// custom_tools.py): the tool goes upstream as a function tool whose one required string
// parameter "content" holds the freeform input, its grammar appended to the description
// ("\n\nFormat:\n```<syntax>\n<definition>\n```"); a call of it comes back as a
// {"type": "custom_tool_call", "call_id", "name", "input"} item whose input is the call's
// "content" (the arguments as sent when they are not such an object). Earlier turns go
// upstream the same way: custom_tool_call as the function call {"content": input},
// custom_tool_call_output as its tool result.

// customToolSchema is the parameters schema of a custom tool's function form.
func customToolSchema(name string) string {
	b := []byte(`{"type":"object","properties":{"content":{"type":"string","description":`)
	b = AppendJSONString(b, "The "+name+" content following the specified format")
	return string(append(b, `}},"required":["content"]}`...))
}

// customTool is the neutral tool of Responses custom tool t, under name.
func customTool(t gjson.Result, name string) tool {
	desc := t.Get("description").Str
	if def := t.Get("format.definition").Str; def != "" {
		desc += "\n\nFormat:\n```" + t.Get("format.syntax").Str + "\n" + def + "\n```"
	}
	return tool{name: name, description: desc, schema: customToolSchema(name)}
}

// customArgs wraps a custom tool call's freeform input as its function arguments.
func customArgs(input string) string {
	return string(append(AppendJSONString([]byte(`{"content":`), input), '}'))
}

// customInput is a custom tool call's freeform input read back from its function arguments.
func customInput(args string) string {
	if c := gjson.Get(args, "content"); gjson.Valid(args) && c.Exists() {
		if c.Type == gjson.String {
			return c.Str
		}
		return c.Raw
	}
	return args
}

// markCustom records name as a custom tool's (its calls are answered as custom_tool_call).
func (r *request) markCustom(name string) {
	if r.custom == nil {
		r.custom = map[string]bool{}
	}
	r.custom[name] = true
}
