package provider

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/tidwall/gjson"
)

// Ollama's native chat API (https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion):
// POST {api_base}/api/chat, streamed as newline-delimited JSON objects, the last one with
// "done": true, done_reason and the token counts (prompt_eval_count, eval_count). LiteLLM's
// ollama and ollama_chat providers both map here; api_base defaults to http://localhost:11434
// (env OLLAMA_API_BASE), no authentication unless api_key is set (sent as a bearer token, for
// Ollama behind a proxy).
type ollamaAPI struct{}

var _ nativeAPI = ollamaAPI{}

func setupOllama(d *Deployment, _ gjson.Result) error {
	d.native = ollamaAPI{}
	d.urls[formatNative] = strings.TrimSuffix(d.APIBase, "/api") + "/api/chat"
	d.embedder = ollamaEmbed{url: strings.TrimSuffix(d.APIBase, "/api") + "/api/embed"}
	h := d.header.Clone()
	if d.APIKey != "" {
		h.Set("Authorization", "Bearer "+d.APIKey)
	}
	for k, v := range d.ExtraHeaders {
		h.Set(k, v)
	}
	d.header = h
	return nil
}

type ollamaToolCall struct {
	Function struct {
		Name      string  `json:"name"`
		Arguments rawJSON `json:"arguments"`
	} `json:"function"`
}

type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Images    []string         `json:"images,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	ToolName  string           `json:"tool_name,omitempty"`
}

type ollamaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string  `json:"name"`
		Description string  `json:"description,omitempty"`
		Parameters  rawJSON `json:"parameters"`
	} `json:"function"`
}

// base64Image returns the payload of a base64 data: URL; ok is false for any other URL.
func base64Image(u string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return "", "", false
	}
	return strings.TrimSuffix(meta, ";base64"), data, true
}

func (ollamaAPI) request(d *Deployment, r *request) ([]byte, error) {
	msgs := make([]ollamaMessage, 0, len(r.messages)+1)
	if len(r.system) > 0 {
		msgs = append(msgs, ollamaMessage{Role: "system", Content: strings.Join(r.system, "\n")})
	}
	names := map[string]string{} // tool call id → tool name, for tool results
	for _, m := range r.messages {
		cur := ollamaMessage{Role: m.role}
		flush := func() {
			if cur.Content != "" || len(cur.Images) > 0 || len(cur.ToolCalls) > 0 {
				msgs = append(msgs, cur)
			}
			cur = ollamaMessage{Role: m.role}
		}
		for _, p := range m.parts {
			switch p.kind {
			case partText:
				cur.Content += p.text
			case partImage:
				_, data, ok := base64Image(p.url)
				if !ok {
					return nil, badRequest("messages: image URLs cannot be sent to provider %s; send the image as a base64 data: URL", d.Provider)
				}
				cur.Images = append(cur.Images, data)
			case partToolUse:
				var tc ollamaToolCall
				tc.Function.Name, tc.Function.Arguments = p.name, validObject(p.args)
				cur.ToolCalls = append(cur.ToolCalls, tc)
				names[p.id] = p.name
			case partToolResult:
				flush()
				msgs = append(msgs, ollamaMessage{Role: "tool", Content: p.text, ToolName: names[p.id]})
			}
		}
		flush()
	}
	body := struct {
		Model    string          `json:"model"`
		Messages []ollamaMessage `json:"messages"`
		Stream   bool            `json:"stream"`
		Tools    []ollamaTool    `json:"tools,omitempty"`
		Options  map[string]any  `json:"options,omitempty"`
	}{Model: d.Model, Messages: msgs, Stream: r.stream}
	for _, t := range r.tools {
		ot := ollamaTool{Type: "function"}
		ot.Function.Name, ot.Function.Description, ot.Function.Parameters = t.name, t.description, rawJSON(schemaOrEmpty(t.schema))
		body.Tools = append(body.Tools, ot)
	}
	opts := map[string]any{}
	if r.maxTokens > 0 {
		opts["num_predict"] = r.maxTokens
	}
	for k, v := range map[string]string{"temperature": r.temperature, "top_p": r.topP, "top_k": r.topK} {
		if v != "" {
			opts[k] = json.Number(v)
		}
	}
	if len(r.stop) > 0 {
		opts["stop"] = r.stop
	}
	if len(opts) > 0 {
		body.Options = opts
	}
	return marshal(body), nil
}

// ollamaStop maps done_reason ("stop", "length", "load", …); a message with tool calls ends
// with "stop" in Ollama, which is a tool-use stop for the client.
func ollamaStop(reason string, tools bool) stopReason {
	switch {
	case reason == "length":
		return stopLength
	case tools:
		return stopTool
	}
	return stopEnd
}

func ollamaUsage(j gjson.Result) usage {
	return usage{in: j.Get("prompt_eval_count").Int(), out: j.Get("eval_count").Int()}
}

func (ollamaAPI) result(raw []byte) (*result, error) {
	if !validJSON(raw) {
		return nil, errBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	r := &result{id: newID("chatcmpl-"), model: j.Get("model").Str}
	msg := j.Get("message")
	if t := msg.Get("content").Str; t != "" {
		r.blocks = append(r.blocks, block{text: t})
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		r.blocks = append(r.blocks, block{tool: true, id: newID("call_"), name: tc.Get("function.name").Str, args: argsText(tc.Get("function.arguments"))})
		return true
	})
	r.stop = ollamaStop(j.Get("done_reason").Str, msg.Get("tool_calls.#").Int() > 0)
	r.usage = ollamaUsage(j)
	return r, nil
}

// argsText returns tool-call arguments as JSON text: an object as is, a string (some servers
// send the JSON encoded) as its content.
func argsText(v gjson.Result) string {
	switch {
	case v.Type == gjson.String:
		return v.Str
	case v.Exists():
		return v.Raw
	}
	return "{}"
}

func (ollamaAPI) frames(body io.Reader) frameReader { return newNDJSONReader(body) }

func (ollamaAPI) decoder(r renderer, model string) decoder {
	return &ollamaDecoder{r: r, model: model}
}

// ollamaDecoder reads Ollama's NDJSON chat stream: each line carries a message delta; the last
// one "done": true with done_reason and the token counts; {"error": "..."} reports a failure.
type ollamaDecoder struct {
	r       renderer
	model   string
	started bool
	tools   bool
}

func (d *ollamaDecoder) frame(b []byte, _, data []byte) ([]byte, string, bool) {
	j := gjson.Parse(bytesView(data))
	if e := j.Get("error"); e.Exists() {
		return d.r.fail(b, 500, e.String()), "", true
	}
	if !d.started {
		d.started = true
		m := strings.Clone(j.Get("model").Str)
		if m == "" {
			m = d.model
		}
		b = d.r.start(b, newID("chatcmpl-"), m, usage{})
	}
	var text string
	msg := j.Get("message")
	if t := msg.Get("content").Str; t != "" {
		text = strings.Clone(t)
		b = d.r.text(b, text)
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		d.tools = true
		b = d.r.toolStart(b, newID("call_"), strings.Clone(tc.Get("function.name").Str))
		b = d.r.toolArgs(b, argsText(tc.Get("function.arguments")))
		return true
	})
	if j.Get("done").Bool() {
		return d.r.finish(b, ollamaStop(j.Get("done_reason").Str, d.tools), "", ollamaUsage(j)), text, true
	}
	return b, text, false
}

func (d *ollamaDecoder) eof(b []byte) ([]byte, error) { return b, errTruncated }
