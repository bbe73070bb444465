package provider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
)

// translateFor translates body (format in) for a deployment of litellm model, as a call would:
// the upstream body and the names dropped.
func translateFor(t *testing.T, model string, in format.Format, body string) (gjson.Result, []string) {
	t.Helper()
	d, err := NewDeployment("id", "g", []byte(`{"model":"`+model+`","api_key":"k","api_base":"http://127.0.0.1:1"}`))
	require.NoError(t, err)
	up, pass, err := plan(d, in)
	require.NoError(t, err)
	require.False(t, pass, "a translated pair")
	b, x, err := upstreamBody(d, in, up, pass, format.StreamRequested([]byte(body)), []byte(body))
	require.NoError(t, err, body)
	require.True(t, gjson.ValidBytes(b), "%s", b)
	var dropped []string
	h := http.Header{}
	x.SetHeader(h)
	if v := h.Get(format.DroppedHeader); v != "" {
		dropped = strings.Split(v, ",")
	}
	return gjson.ParseBytes(b), dropped
}

// The translation table of docs/api.md, row by row.
func TestTranslationTable(t *testing.T) {
	t.Parallel()
	const claude, claude35, gpt = "anthropic/claude-sonnet-4-5", "anthropic/claude-3-5-sonnet-20241022", "openai/gpt-4o"
	for _, c := range []struct {
		name, model string
		in          format.Format
		body        string
		want        map[string]string // gjson path → raw JSON ("" = absent)
		dropped     []string
	}{
		{name: "messages system turn folded", model: gpt, in: format.FormatMessages,
			body:    `{"model":"g","max_tokens":5,"system":"top","messages":[{"role":"system","content":[{"type":"text","text":"env"}],"clear_at":"never"},{"role":"user","content":"hi"}]}`,
			want:    map[string]string{"messages.0.content": `"top"`, "messages.1.role": `"system"`, "messages.1.content": `"env"`, "messages.2.role": `"user"`},
			dropped: []string{"messages.system.clear_at"}},
		{name: "chat developer role to anthropic system", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"developer","content":"dev"},{"role":"user","content":"hi"}]}`,
			want: map[string]string{"system": `"dev"`, "messages.#": `1`}},
		{name: "responses developer to chat system", model: "groq/m", in: format.FormatResponses,
			body: `{"model":"g","input":[{"role":"developer","content":"dev"},{"role":"user","content":"hi"}]}`,
			want: map[string]string{"messages.0.role": `"system"`, "messages.0.content": `"dev"`}},
		{name: "chat json_schema to native structured outputs", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}}}`,
			want: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":{"type":"object"}}}`, "tools": ""}},
		{name: "chat json_object to forced tool", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`,
			want: map[string]string{"tools.0.name": `"json_tool_call"`, "tool_choice": `{"type":"tool","name":"json_tool_call"}`, "output_config": ""}},
		{name: "chat json_schema to older claude: forced tool", model: claude35, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}}`,
			want: map[string]string{"tools.#": `2`, "tools.0.name": `"f"`, "tools.1": `{"name":"json_tool_call","input_schema":{"type":"object","properties":{"a":{"type":"string"}}}}`, "tool_choice.name": `"json_tool_call"`}},
		{name: "responses text.format to chat response_format", model: "groq/m", in: format.FormatResponses,
			body: `{"model":"g","input":"hi","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":false}}}`,
			want: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":false}}`}},
		{name: "messages output_config.format to chat", model: gpt, in: format.FormatMessages,
			body: `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`,
			want: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object"}}}`}},
		{name: "reasoning_effort to thinking budget", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"medium"}`,
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":2048}`, "max_tokens": `6144`}},
		{name: "reasoning_effort to a Claude without thinking dropped", model: claude35, in: format.FormatChat,
			body:    `{"model":"g","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high"}`,
			want:    map[string]string{"thinking": "", "max_tokens": `4096`},
			dropped: []string{"reasoning_effort"}},
		{name: "responses reasoning.effort to thinking", model: claude, in: format.FormatResponses,
			body: `{"model":"g","input":"hi","max_output_tokens":9000,"reasoning":{"effort":"high","summary":"auto"}}`,
			want: map[string]string{"thinking.budget_tokens": `4096`, "max_tokens": `9000`}, dropped: []string{"reasoning.summary"}},
		{name: "thinking to a model without reasoning dropped", model: gpt, in: format.FormatMessages,
			body:    `{"model":"g","max_tokens":5000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
			want:    map[string]string{"reasoning_effort": ""},
			dropped: []string{"reasoning_effort"}},
		{name: "thinking budget to reasoning_effort", model: "openai/o3", in: format.FormatMessages,
			body: `{"model":"g","max_tokens":5000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
			want: map[string]string{"reasoning_effort": `"low"`, "max_completion_tokens": `5000`}},
		{name: "output_config.effort to reasoning_effort", model: "openai/gpt-5-mini", in: format.FormatMessages,
			body: `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"effort":"max"}}`,
			want: map[string]string{"reasoning_effort": `"high"`}},
		{name: "tool_choice required to any, parallel off", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","parallel_tool_calls":false}`,
			want: map[string]string{"tool_choice": `{"type":"any","disable_parallel_tool_use":true}`}},
		{name: "tool_choice named tool to chat", model: gpt, in: format.FormatMessages,
			body: `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}}`,
			want: map[string]string{"tool_choice": `{"type":"function","function":{"name":"f"}}`}},
		{name: "tool_choice none to anthropic: no tools", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			want: map[string]string{"tools": "", "tool_choice": ""}},
		{name: "chat allowed_tools choice dropped", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`,
			want: map[string]string{"tool_choice": ""}, dropped: []string{"tool_choice.allowed_tools"}},
		{name: "stop to stop_sequences, whitespace dropped", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"stop":["END"," "]}`,
			want: map[string]string{"stop_sequences": `["END"]`}, dropped: []string{"stop"}},
		{name: "max_completion_tokens to max_tokens", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":77,"max_tokens":5}`,
			want: map[string]string{"max_tokens": `77`}},
		{name: "chat fields without an Anthropic equivalent dropped", model: claude, in: format.FormatChat,
			body:    `{"model":"g","messages":[{"role":"user","content":"hi"}],"seed":1,"logprobs":true,"top_logprobs":2,"n":2,"frequency_penalty":0.5,"metadata":{"a":"b"},"user":"u1","service_tier":null}`,
			want:    map[string]string{"metadata": `{"user_id":"u1"}`},
			dropped: []string{"seed", "logprobs", "top_logprobs", "frequency_penalty", "n"}},
		{name: "email user dropped for anthropic", model: claude, in: format.FormatChat,
			body:    `{"model":"g","messages":[{"role":"user","content":"hi"}],"user":"a@b.c"}`,
			want:    map[string]string{"metadata": ""},
			dropped: []string{"user"}},
		{name: "top_k to chat dropped", model: gpt, in: format.FormatMessages,
			body:    `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"top_k":3,"metadata":{"user_id":"u"}}`,
			want:    map[string]string{"user": `"u"`, "top_k": ""},
			dropped: []string{"top_k"}},
		{name: "anthropic server tools to chat dropped", model: gpt, in: format.FormatMessages,
			body:    `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","input_schema":{"type":"object"}}]}`,
			want:    map[string]string{"tools.#": `1`, "tools.0.function.name": `"f"`},
			dropped: []string{"tools.web_search_20250305"}},
		{name: "thinking history to chat dropped, cache_control reported", model: gpt, in: format.FormatMessages,
			body:    `{"model":"g","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"x"},{"type":"text","text":"a"}]},{"role":"user","content":"again"}]}`,
			want:    map[string]string{"messages.2.content": `"a"`},
			dropped: []string{"messages.content.thinking", "cache_control"}},
		{name: "responses hosted tools: web_search kept, others dropped", model: claude, in: format.FormatResponses,
			body:    `{"model":"g","input":"hi","store":false,"include":["reasoning.encrypted_content"],"tools":[{"type":"web_search"},{"type":"file_search","vector_store_ids":["v"]},{"type":"code_interpreter","container":{"type":"auto"}},{"type":"computer_use_preview","display_width":1,"display_height":1,"environment":"linux"}]}`,
			want:    map[string]string{"tools": `[{"type":"web_search_20250305","name":"web_search"}]`},
			dropped: []string{"include", "tools.file_search", "tools.code_interpreter", "tools.computer_use_preview"}},
		{name: "responses web_search tool_choice to the server tool", model: claude, in: format.FormatResponses,
			body: `{"model":"g","input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`,
			want: map[string]string{"tool_choice": `{"type":"tool","name":"web_search"}`}},
		{name: "responses web_search to a chat upstream dropped", model: "groq/m", in: format.FormatResponses,
			body:    `{"model":"g","input":"hi","tools":[{"type":"web_search"},{"type":"function","name":"f"}],"tool_choice":"auto"}`,
			want:    map[string]string{"tools.#": `1`, "tool_choice": `"auto"`},
			dropped: []string{"tools.web_search"}},
		{name: "chat web_search_options to anthropic web search", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"web_search_options":{"user_location":{"type":"approximate","approximate":{"city":"Berlin"}}}}`,
			want: map[string]string{"tools": `[{"type":"web_search_20250305","name":"web_search","user_location":{"type":"approximate","city":"Berlin"}}]`}},
		{name: "namespace tools flattened, named choice too", model: claude, in: format.FormatResponses,
			body: `{"model":"g","input":"hi","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"a"}]}],"tool_choice":{"type":"function","namespace":"ns","name":"a"}}`,
			want: map[string]string{"tools.0.name": `"ns__a"`, "tool_choice": `{"type":"tool","name":"ns__a"}`}},
		{name: "chat PDF file part to anthropic document", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":[{"type":"text","text":"read"},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}}]}]}`,
			want: map[string]string{"messages.0.content.1": `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="},"title":"a.pdf"}`}},
		{name: "anthropic document to chat file part, tool result image follows", model: gpt, in: format.FormatMessages,
			body: `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="},"title":"a.pdf"}]},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"shot","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}]}]}`,
			want: map[string]string{"messages.0.content.0": `{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}}`,
				"messages.2": `{"role":"tool","tool_call_id":"t1","content":"see"}`, "messages.3.content.0.image_url.url": `"data:image/png;base64,iVBO"`}},
		{name: "responses input_file url to anthropic document", model: claude, in: format.FormatResponses,
			body: `{"model":"g","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]}`,
			want: map[string]string{"messages.0.content.0": `{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}`}},
		{name: "anthropic document url to chat dropped", model: gpt, in: format.FormatMessages,
			body:    `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"read"},{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`,
			dropped: []string{"messages.content.document"}},
		{name: "chat cache_control to anthropic breakpoints", model: claude, in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"system","content":[{"type":"text","text":"long","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral","ttl":"1h"}}]}],"tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral"}}]}`,
			want: map[string]string{"system": `[{"type":"text","text":"long","cache_control":{"type":"ephemeral"}}]`,
				"messages.0.content.0": `{"type":"text","text":"q","cache_control":{"type":"ephemeral","ttl":"1h"}}`,
				"tools.0":              `{"name":"f","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}`}},
		{name: "chat cache_control on an assistant turn is not carried", model: claude, in: format.FormatChat,
			body:    `{"model":"g","messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"r"}]}`,
			dropped: []string{"cache_control"}},
		{name: "gemini: chat json_object to responseMimeType, reasoning reported", model: "gemini/gemini-2.5-pro", in: format.FormatChat,
			body:    `{"model":"g","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"},"reasoning_effort":"low"}`,
			want:    map[string]string{"generationConfig.responseMimeType": `"application/json"`, "generationConfig.responseJsonSchema": ""},
			dropped: []string{"reasoning"}},
		{name: "gemini: chat json_schema to responseJsonSchema", model: "gemini/gemini-2.5-pro", in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"x":{"type":"string"}}}}}}`,
			want: map[string]string{"generationConfig.responseMimeType": `"application/json"`, "generationConfig.responseJsonSchema": `{"type":"object","properties":{"x":{"type":"string"}}}`}},
		{name: "gemini: responses text.format to responseJsonSchema", model: "gemini/gemini-2.5-pro", in: format.FormatResponses,
			body: `{"model":"g","input":"hi","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}}}`,
			want: map[string]string{"generationConfig.responseMimeType": `"application/json"`, "generationConfig.responseJsonSchema": `{"type":"object"}`}},
		{name: "ollama: messages output_config.format to format schema", model: "ollama/llama3.2", in: format.FormatMessages,
			body: `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`,
			want: map[string]string{"format": `{"type":"object"}`}},
		{name: "ollama: chat json_object to format json", model: "ollama/llama3.2", in: format.FormatChat,
			body: `{"model":"g","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`,
			want: map[string]string{"format": `"json"`}},
		{name: "ollama: responses text.format to format schema", model: "ollama/llama3.2", in: format.FormatResponses,
			body: `{"model":"g","input":"hi","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}}}`,
			want: map[string]string{"format": `{"type":"object"}`}},
		{name: "gemini: messages beta output_format to responseJsonSchema", model: "gemini/gemini-2.0-flash", in: format.FormatMessages,
			body: `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_format":{"type":"json_schema","schema":{"type":"object"}}}`,
			want: map[string]string{"generationConfig.responseMimeType": `"application/json"`, "generationConfig.responseJsonSchema": `{"type":"object"}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, dropped := translateFor(t, c.model, c.in, c.body)
			for path, want := range c.want {
				got := out.Get(path)
				if want == "" {
					require.False(t, got.Exists(), "%s: %s", path, out.Raw)
					continue
				}
				require.JSONEq(t, want, got.Raw, "%s: %s", path, out.Raw)
			}
			require.Equal(t, c.dropped, dropped, out.Raw)
		})
	}
}

// What cannot be honoured is a 400 naming it, no upstream call.
func TestTranslationRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		model string
		in    format.Format
		body  string
		msg   string
	}{
		{"anthropic/claude-sonnet-4-5", format.FormatChat, `{"model":"g","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`,
			"messages: file parts by file_id cannot be translated for this provider (the gateway stores no files); send file_data"},
		{"anthropic/claude-sonnet-4-5", format.FormatResponses, `{"model":"g","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}`,
			"input: input_file by file_id cannot be translated for this provider (the gateway stores no files); send file_data or file_url"},
		{"gemini/gemini-2.5-pro", format.FormatMessages, `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]}`,
			"messages: documents cannot be translated for provider gemini"},
		{"openai/gpt-4o", format.FormatMessages, `{"model":"g","max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result","source":"s","title":"t","content":[]}]}]}`,
			`messages: content block type "search_result" cannot be translated for this provider`},
		{"anthropic/claude-sonnet-4-5", format.FormatResponses, `{"model":"g","input":"hi","previous_response_id":"resp_1"}`,
			"previous_response_id is not supported by this model's provider (the gateway does not store responses)"},
	} {
		d, err := NewDeployment("id", "g", []byte(`{"model":"`+c.model+`","api_key":"k","api_base":"http://127.0.0.1:1"}`))
		require.NoError(t, err)
		up, pass, err := plan(d, c.in)
		require.NoError(t, err)
		_, _, err = upstreamBody(d, c.in, up, pass, false, []byte(c.body))
		var ue *format.RequestError
		require.ErrorAs(t, err, &ue, c.body)
		require.Equal(t, 400, ue.Status())
		require.Equal(t, c.msg, ue.Message)
	}
}

// Reasoning sent back: a Responses reasoning item carrying an Anthropic thinking signature
// (as Codex sends it back) and a chat turn's thinking_blocks reach Anthropic again, signed; an
// OpenAI reasoning item is dropped. (The answers' side: format's TestReasoningAcrossFormats.)
func TestReasoningAcrossFormatsBack(t *testing.T) {
	t.Parallel()
	ant := `{"id":"msg_1","model":"claude","content":[{"type":"thinking","thinking":"hmm","signature":"sig1"},{"type":"text","text":"42"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":4}}`
	res, err := format.ParseResult(format.FormatMessages, []byte(ant))
	require.NoError(t, err)
	resp := gjson.ParseBytes(format.RenderResult(format.FormatResponses, res))
	// sent back (as Codex does), the item is the signed thinking block again
	back, dropped := translateFor(t, "anthropic/claude-sonnet-4-5", format.FormatResponses, `{"model":"g","input":[{"role":"user","content":"q"},`+resp.Get("output.0").Raw+`,{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"r"}],"tools":[{"type":"function","name":"f"}]}`)
	require.Empty(t, dropped)
	require.JSONEq(t, `[{"type":"thinking","thinking":"hmm","signature":"sig1"},{"type":"tool_use","id":"c1","name":"f","input":{}}]`, back.Get("messages.1.content").Raw, back.Raw)
	_, dropped = translateFor(t, "anthropic/claude-sonnet-4-5", format.FormatResponses, `{"model":"g","input":[{"type":"reasoning","summary":[],"encrypted_content":"gAAAA-openai"},{"role":"user","content":"q"}]}`)
	require.Equal(t, []string{"input.reasoning"}, dropped)

	// a chat client's earlier turn with thinking_blocks: back to Anthropic, signed
	out2, dropped := translateFor(t, "anthropic/claude-sonnet-4-5", format.FormatChat, `{"model":"g","reasoning_effort":"low","messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"reasoning_content":"hmm","thinking_blocks":[{"type":"thinking","thinking":"hmm","signature":"sig1"}],"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}]}`)
	require.Empty(t, dropped)
	require.JSONEq(t, `[{"type":"thinking","thinking":"hmm","signature":"sig1"},{"type":"tool_use","id":"t1","name":"f","input":{}}]`, out2.Get("messages.1.content").Raw, out2.Raw)
}

func TestThinkingBudgetFits(t *testing.T) {
	t.Parallel()
	out, dropped := translateFor(t, "anthropic/claude-sonnet-4-5", format.FormatChat, `{"model":"g","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","max_tokens":3000}`)
	require.Equal(t, int64(2999), out.Get("thinking.budget_tokens").Int(), out.Raw)
	require.Empty(t, dropped)
	out, dropped = translateFor(t, "anthropic/claude-sonnet-4-5", format.FormatChat, `{"model":"g","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low","max_tokens":1000}`)
	require.False(t, out.Get("thinking").Exists(), out.Raw)
	require.Equal(t, []string{"reasoning_effort"}, dropped)
}
