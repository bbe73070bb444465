// Package ollama is the provider.Vendor of Ollama's native API (LiteLLM's ollama and
// ollama_chat providers), registered by cmd/gateway: provider.NewBuilder(policy, ollama.Vendor).
package ollama

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"lockstep/pkg/provider"
)

// Ollama's native chat API (https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion):
// POST {api_base}/api/chat, streamed as newline-delimited JSON objects, the last one with
// "done": true, done_reason and the token counts (prompt_eval_count, eval_count). LiteLLM's
// ollama and ollama_chat providers both map here; api_base defaults to http://localhost:11434
// (env OLLAMA_API_BASE), no authentication unless api_key is set (sent as a bearer token, for
// Ollama behind a proxy).
type ollamaAPI struct{}

var _ provider.Wire = ollamaAPI{}

// Vendor serves the ollama/<model> and ollama_chat/<model> prefixes.
var Vendor = provider.Vendor{Names: []string{"ollama", "ollama_chat"}, APIBase: "http://localhost:11434", BaseEnv: "OLLAMA_API_BASE", Setup: setupOllama}

func setupOllama(s *provider.Setup) error {
	d := s.Deployment()
	s.SetWire(ollamaAPI{}, strings.TrimSuffix(d.APIBase, "/api")+"/api/chat", "")
	s.SetEmbedder(ollamaEmbed{url: strings.TrimSuffix(d.APIBase, "/api") + "/api/embed"})
	if d.APIKey != "" {
		s.SetHeader("Authorization", "Bearer "+d.APIKey) // extra_headers still win
	}
	return nil
}

type ollamaToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
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
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// RendersOutputFormat: structured output is the request's format (see ollamaAPI.Request).
func (ollamaAPI) RendersOutputFormat() {}

var _ provider.OutputFormatWire = ollamaAPI{}

func (ollamaAPI) Request(d *provider.Deployment, r *format.Request) ([]byte, error) {
	msgs := make([]ollamaMessage, 0, len(r.Messages())+1)
	if len(r.System()) > 0 {
		msgs = append(msgs, ollamaMessage{Role: "system", Content: strings.Join(r.System(), "\n")})
	}
	names := map[string]string{} // tool call id → tool name, for tool results
	for _, m := range r.Messages() {
		cur := ollamaMessage{Role: m.Role()}
		flush := func() {
			if cur.Content != "" || len(cur.Images) > 0 || len(cur.ToolCalls) > 0 {
				msgs = append(msgs, cur)
			}
			cur = ollamaMessage{Role: m.Role()}
		}
		for _, p := range m.Parts() {
			switch p.Kind() {
			case format.PartText:
				cur.Content += p.Text()
			case format.PartImage:
				_, data, ok := format.Base64Image(p.URL())
				if !ok {
					return nil, format.BadRequest("messages: image URLs cannot be sent to provider %s; send the image as a base64 data: URL", d.Provider)
				}
				cur.Images = append(cur.Images, data)
			case format.PartToolUse:
				var tc ollamaToolCall
				tc.Function.Name, tc.Function.Arguments = p.Name(), format.ValidObject(p.Args())
				cur.ToolCalls = append(cur.ToolCalls, tc)
				names[p.ID()] = p.Name()
			case format.PartToolResult:
				flush()
				msgs = append(msgs, ollamaMessage{Role: "tool", Content: p.Text(), ToolName: names[p.ID()]})
			}
		}
		flush()
	}
	body := struct {
		Model    string          `json:"model"`
		Messages []ollamaMessage `json:"messages"`
		Stream   bool            `json:"stream"`
		Tools    []ollamaTool    `json:"tools,omitempty"`
		Format   json.RawMessage `json:"format,omitempty"`
		Options  map[string]any  `json:"options,omitempty"`
	}{Model: d.Model, Messages: msgs, Stream: r.Stream()}
	// Structured output as LiteLLM maps response_format for Ollama (litellm/llms/ollama):
	// json_schema → format: the schema; json_object (or a schema-less json_schema) →
	// format: "json" (https://github.com/ollama/ollama/blob/main/docs/api.md, "format").
	switch kind, schema := r.OutputFormat(); {
	case kind == "json_schema" && schema != "":
		body.Format = json.RawMessage(schema)
	case kind != "":
		body.Format = json.RawMessage(`"json"`)
	}
	for _, t := range r.Tools() {
		ot := ollamaTool{Type: "function"}
		ot.Function.Name, ot.Function.Description, ot.Function.Parameters = t.Name(), t.Description(), json.RawMessage(format.SchemaOrEmpty(t.Schema()))
		body.Tools = append(body.Tools, ot)
	}
	opts := map[string]any{}
	if r.MaxTokens() > 0 {
		opts["num_predict"] = r.MaxTokens()
	}
	for k, v := range map[string]string{"temperature": r.Temperature(), "top_p": r.TopP(), "top_k": r.TopK()} {
		if v != "" {
			opts[k] = json.Number(v)
		}
	}
	if len(r.StopSequences()) > 0 {
		opts["stop"] = r.StopSequences()
	}
	if len(opts) > 0 {
		body.Options = opts
	}
	return format.Marshal(body), nil
}

// ollamaStop maps done_reason ("stop", "length", "load", …); a message with tool calls ends
// with "stop" in Ollama, which is a tool-use stop for the client.
func ollamaStop(reason string, tools bool) format.Stop {
	switch {
	case reason == "length":
		return format.StopLength
	case tools:
		return format.StopTool
	}
	return format.StopEnd
}

func ollamaUsage(j gjson.Result) format.Tokens {
	return format.Tokens{In: j.Get("prompt_eval_count").Int(), Out: j.Get("eval_count").Int()}
}

func (ollamaAPI) Result(raw []byte) (*format.Result, error) {
	if !format.ValidJSON(raw) {
		return nil, format.ErrBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	r := format.NewResult(format.NewID("chatcmpl-"), j.Get("model").Str)
	msg := j.Get("message")
	if t := msg.Get("content").Str; t != "" {
		r.AddText(t)
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		r.AddToolCall(format.NewID("call_"), tc.Get("function.name").Str, format.ArgsText(tc.Get("function.arguments")))
		return true
	})
	r.SetStop(ollamaStop(j.Get("done_reason").Str, msg.Get("tool_calls.#").Int() > 0))
	r.SetUsage(ollamaUsage(j))
	return r, nil
}

func (ollamaAPI) Frames(body io.Reader) provider.FrameReader { return newNDJSONReader(body) }

// ndjsonReader splits a body of newline-delimited JSON objects (Ollama's stream), skipping
// blank lines: each frame's payload is one line (a provider.FrameReader).
type ndjsonReader struct {
	br   *bufio.Reader
	line []byte
}

func newNDJSONReader(r io.Reader) *ndjsonReader {
	return &ndjsonReader{br: bufio.NewReaderSize(r, 32<<10)}
}

func (n *ndjsonReader) Next() error {
	for {
		n.line = n.line[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = n.br.ReadSlice('\n')
			n.line = append(n.line, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if t := bytes.TrimSpace(n.line); len(t) > 0 {
			n.line = t
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (n *ndjsonReader) Current() (raw, event, data []byte) { return n.line, nil, n.line }

func (ollamaAPI) Decoder(r format.Renderer, model string) format.Decoder {
	return &ollamaDecoder{r: r, model: model}
}

// ollamaDecoder reads Ollama's NDJSON chat stream: each line carries a message delta; the last
// one "done": true with done_reason and the token counts; {"error": "..."} reports a failure.
type ollamaDecoder struct {
	r       format.Renderer
	model   string
	started bool
	tools   bool
}

func (d *ollamaDecoder) Frame(b []byte, _, data []byte) ([]byte, string, bool) {
	j := gjson.Parse(bytesView(data))
	if e := j.Get("error"); e.Exists() {
		return d.r.Fail(b, 500, e.String()), "", true
	}
	if !d.started {
		d.started = true
		m := strings.Clone(j.Get("model").Str)
		if m == "" {
			m = d.model
		}
		b = d.r.Start(b, format.NewID("chatcmpl-"), m, format.Tokens{})
	}
	var text string
	msg := j.Get("message")
	if t := msg.Get("content").Str; t != "" {
		text = strings.Clone(t)
		b = d.r.Text(b, text)
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		d.tools = true
		b = d.r.ToolStart(b, format.NewID("call_"), strings.Clone(tc.Get("function.name").Str))
		b = d.r.ToolArgs(b, format.ArgsText(tc.Get("function.arguments")))
		return true
	})
	if j.Get("done").Bool() {
		return d.r.Finish(b, ollamaStop(j.Get("done_reason").Str, d.tools), "", ollamaUsage(j)), text, true
	}
	return b, text, false
}

func (d *ollamaDecoder) EOF(b []byte) ([]byte, error) { return b, format.ErrTruncated }

// ---- Ollama (https://github.com/ollama/ollama/blob/main/docs/api.md#generate-embeddings) ----

// ollamaEmbed is Ollama's POST /api/embed {"model", "input": [...], "dimensions"?} answering
// {"embeddings": [[...]], "prompt_eval_count"} (the prompt tokens).
type ollamaEmbed struct{ url string }

func (o ollamaEmbed) Calls(d *provider.Deployment, r *provider.EmbedRequest) ([]provider.EmbedCall, error) {
	b := []byte(`{"model":`)
	b = format.AppendJSONString(b, d.Model)
	b = append(b, `,"input":`...)
	b = format.AppendJSONStrings(b, r.Inputs())
	if r.Dimensions() > 0 {
		b = append(b, `,"dimensions":`...)
		b = strconv.AppendInt(b, r.Dimensions(), 10)
	}
	return []provider.EmbedCall{{URL: o.url, Body: append(b, '}'), N: len(r.Inputs())}}, nil
}

func (ollamaEmbed) Parse(raw []byte, _ http.Header) ([]string, int64, error) {
	j := gjson.ParseBytes(raw)
	var out []string
	var err error
	j.Get("embeddings").ForEach(func(_, e gjson.Result) bool {
		var v string
		v, err = provider.VectorOf(e, "embeddings[]")
		out = append(out, v)
		return err == nil
	})
	return out, j.Get("prompt_eval_count").Int(), err
}

// bytesView is b as a string without a copy, for gjson reads of a frame (valid until the
// frame's buffer is reused).
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
