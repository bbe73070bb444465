// Package gemini is the provider.Vendor of Google AI Studio's Gemini API (LiteLLM's gemini
// provider), and the Wire Vertex AI's Gemini models speak (pkg/provider/vertex); registered by
// cmd/gateway: provider.NewBuilder(policy, gemini.Vendor, …).
package gemini

import (
	"encoding/json"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"lockstep/pkg/provider"
)

// Google's Gemini API, as served by Google AI Studio (gemini/) and Vertex AI (vertex_ai/):
// POST …/models/{model}:generateContent, streamed by :streamGenerateContent?alt=sse (SSE frames,
// each a GenerateContentResponse; the last carries finishReason and usageMetadata)
// (https://ai.google.dev/api/generate-content). Mappings follow LiteLLM
// (litellm/llms/vertex_ai/gemini/transformation.py).
type API struct{}

var _ provider.Wire = API{}

// DefaultAPIBase is Google AI Studio's endpoint.
const DefaultAPIBase = "https://generativelanguage.googleapis.com"

// Vendor serves the gemini/<model> prefix.
var Vendor = provider.Vendor{Names: []string{"gemini"}, APIBase: DefaultAPIBase, KeyEnv: "GEMINI_API_KEY", BaseEnv: "GEMINI_API_BASE", Setup: setupGemini}

// setupGemini finishes a gemini/<model> deployment: {api_base}/v1beta/models/{model}:generateContent
// with the key (api_key, env GEMINI_API_KEY) in the x-goog-api-key header.
func setupGemini(s *provider.Setup) error {
	d := s.Deployment()
	base := strings.TrimSuffix(d.APIBase, "/v1beta")
	prefix := base + "/v1beta/models/" + url.PathEscape(d.Model)
	s.SetWire(API{}, prefix+":generateContent", prefix+":streamGenerateContent?alt=sse")
	s.SetEmbedder(geminiEmbed{prefix: prefix, model: "models/" + d.Model})
	if d.APIKey != "" {
		s.SetHeader("x-goog-api-key", d.APIKey) // extra_headers still win
	}
	return nil
}

type geminiPart struct {
	Text             string          `json:"text,omitempty"`
	InlineData       *geminiBlob     `json:"inlineData,omitempty"`
	FileData         *geminiFile     `json:"fileData,omitempty"`
	FunctionCall     *geminiCall     `json:"functionCall,omitempty"`
	FunctionResponse *geminiFuncResp `json:"functionResponse,omitempty"`
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type geminiFile struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type geminiCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiFuncResp struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

// RendersOutputFormat: structured output goes into generationConfig (see [API.Request]).
func (API) RendersOutputFormat() {}

var _ provider.OutputFormatWire = API{}

func (API) Request(d *provider.Deployment, r *format.Request) ([]byte, error) {
	type funcDecl struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	type toolDecl struct {
		FunctionDeclarations []funcDecl `json:"functionDeclarations"`
	}
	type callingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	}
	type toolConfig struct {
		FunctionCallingConfig callingConfig `json:"functionCallingConfig"`
	}
	body := struct {
		Contents          []geminiContent `json:"contents"`
		SystemInstruction *geminiContent  `json:"systemInstruction,omitempty"`
		GenerationConfig  map[string]any  `json:"generationConfig,omitempty"`
		Tools             []toolDecl      `json:"tools,omitempty"`
		ToolConfig        *toolConfig     `json:"toolConfig,omitempty"`
	}{Contents: make([]geminiContent, 0, len(r.Messages()))}
	if len(r.System()) > 0 {
		sys := &geminiContent{}
		for _, s := range r.System() {
			sys.Parts = append(sys.Parts, geminiPart{Text: s})
		}
		body.SystemInstruction = sys
	}
	names := map[string]string{} // tool call id → function name
	for _, m := range r.Messages() {
		c := geminiContent{Role: "user"}
		if m.Role() == "assistant" {
			c.Role = "model"
		}
		for _, p := range m.Parts() {
			switch p.Kind() {
			case format.PartText:
				c.Parts = append(c.Parts, geminiPart{Text: p.Text()})
			case format.PartImage:
				if mt, data, ok := format.Base64Image(p.URL()); ok {
					c.Parts = append(c.Parts, geminiPart{InlineData: &geminiBlob{MimeType: mt, Data: data}})
				} else if strings.HasPrefix(p.URL(), "gs://") || strings.HasPrefix(p.URL(), "https://generativelanguage.googleapis.com/") {
					c.Parts = append(c.Parts, geminiPart{FileData: &geminiFile{FileURI: p.URL()}})
				} else {
					return nil, format.BadRequest("messages: image URLs cannot be sent to provider %s; send a base64 data: URL or a gs:// URI", d.Provider)
				}
			case format.PartToolUse:
				names[p.ID()] = p.Name()
				c.Parts = append(c.Parts, geminiPart{FunctionCall: &geminiCall{Name: p.Name(), Args: format.ValidObject(p.Args())}})
			case format.PartToolResult:
				name := names[p.ID()]
				if name == "" {
					name = p.ID()
				}
				resp := format.Marshal(map[string]string{"content": p.Text()})
				if format.ValidJSONString(p.Text()) && gjson.Parse(p.Text()).IsObject() {
					resp = []byte(p.Text())
				}
				c.Parts = append(c.Parts, geminiPart{FunctionResponse: &geminiFuncResp{Name: name, Response: resp}})
			}
		}
		if len(c.Parts) > 0 {
			body.Contents = append(body.Contents, c)
		}
	}
	gc := map[string]any{}
	if r.MaxTokens() > 0 {
		gc["maxOutputTokens"] = r.MaxTokens()
	}
	for k, v := range map[string]string{"temperature": r.Temperature(), "topP": r.TopP(), "topK": r.TopK()} {
		if v != "" {
			gc[k] = json.RawMessage(v)
		}
	}
	if len(r.StopSequences()) > 0 {
		gc["stopSequences"] = r.StopSequences()
	}
	// Structured output as LiteLLM maps response_format for Gemini: json_object →
	// responseMimeType application/json; json_schema → that plus the schema, sent unchanged as
	// responseJsonSchema (standard JSON Schema; https://ai.google.dev/api/generate-content#generationconfig).
	switch kind, schema := r.OutputFormat(); kind {
	case "json_schema":
		if schema != "" && gjson.Valid(schema) {
			gc["responseJsonSchema"] = json.RawMessage(schema)
		}
		gc["responseMimeType"] = "application/json"
	case "json_object":
		gc["responseMimeType"] = "application/json"
	}
	if len(gc) > 0 {
		body.GenerationConfig = gc
	}
	if len(r.Tools()) > 0 {
		td := toolDecl{}
		for _, t := range r.Tools() {
			fd := funcDecl{Name: t.Name(), Description: t.Description()}
			if t.Schema() != "" {
				fd.Parameters = json.RawMessage(t.Schema())
			}
			td.FunctionDeclarations = append(td.FunctionDeclarations, fd)
		}
		body.Tools = []toolDecl{td}
	}
	mode, name := r.ToolChoice()
	switch mode {
	case "auto":
		body.ToolConfig = &toolConfig{callingConfig{Mode: "AUTO"}}
	case "any":
		body.ToolConfig = &toolConfig{callingConfig{Mode: "ANY"}}
	case "none":
		body.ToolConfig = &toolConfig{callingConfig{Mode: "NONE"}}
	case "tool":
		body.ToolConfig = &toolConfig{callingConfig{Mode: "ANY", AllowedFunctionNames: []string{name}}}
	}
	return format.Marshal(body), nil
}

// geminiStop maps a candidate's finishReason
// (https://ai.google.dev/api/generate-content#FinishReason); a STOP after function calls is a
// tool-use stop for the client.
func geminiStop(reason string, tools bool) format.Stop {
	switch reason {
	case "MAX_TOKENS":
		return format.StopLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return format.StopFilter
	}
	if tools {
		return format.StopTool
	}
	return format.StopEnd
}

// geminiUsage reads usageMetadata: promptTokenCount (cached tokens included, as OpenAI counts
// them), candidatesTokenCount + thoughtsTokenCount, cachedContentTokenCount.
func geminiUsage(u gjson.Result) format.Tokens {
	return format.Tokens{In: u.Get("promptTokenCount").Int(), Out: u.Get("candidatesTokenCount").Int() + u.Get("thoughtsTokenCount").Int(),
		CacheRead: u.Get("cachedContentTokenCount").Int()}
}

func (API) Result(raw []byte) (*format.Result, error) {
	if !format.ValidJSON(raw) {
		return nil, format.ErrBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	id := "chatcmpl-" + j.Get("responseId").Str
	if id == "chatcmpl-" {
		id = format.NewID("chatcmpl-")
	}
	r := format.NewResult(id, j.Get("modelVersion").Str)
	cand := j.Get("candidates.0")
	tools := false
	cand.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		switch {
		case p.Get("thought").Bool():
		case p.Get("functionCall").Exists():
			tools = true
			fc := p.Get("functionCall")
			id := fc.Get("id").Str
			if id == "" {
				id = format.NewID("call_")
			}
			r.AddToolCall(id, fc.Get("name").Str, format.ArgsText(fc.Get("args")))
		case p.Get("text").Type == gjson.String:
			r.AppendText(p.Get("text").Str)
		}
		return true
	})
	r.SetStop(geminiStop(cand.Get("finishReason").Str, tools))
	if !cand.Exists() && j.Get("promptFeedback.blockReason").Exists() {
		r.SetStop(format.StopFilter)
	}
	r.SetUsage(geminiUsage(j.Get("usageMetadata")))
	return r, nil
}

func (API) Frames(body io.Reader) provider.FrameReader { return provider.NewSSEReader(body) }

func (API) Decoder(r format.Renderer, model string) format.Decoder {
	return &geminiDecoder{r: r, model: model}
}

// geminiDecoder reads streamGenerateContent?alt=sse: each frame a GenerateContentResponse
// with the next parts; the stream ends with the body, after a frame with a finishReason.
type geminiDecoder struct {
	r        format.Renderer
	model    string
	started  bool
	finished bool
	tools    bool
	stop     format.Stop
	usage    format.Tokens
}

func (d *geminiDecoder) Frame(b []byte, _, data []byte) ([]byte, string, bool) {
	if len(data) == 0 || data[0] != '{' {
		return b, "", false
	}
	j := gjson.Parse(bytesView(data))
	if e := j.Get("error"); e.Exists() {
		status := int(e.Get("code").Int())
		if status < 400 || status > 599 {
			status = 500
		}
		return d.r.Fail(b, status, e.Get("message").String()), "", true
	}
	if !d.started {
		d.started = true
		id := "chatcmpl-" + j.Get("responseId").Str
		if id == "chatcmpl-" {
			id = format.NewID("chatcmpl-")
		}
		m := strings.Clone(j.Get("modelVersion").Str)
		if m == "" {
			m = d.model
		}
		b = d.r.Start(b, strings.Clone(id), m, format.Tokens{})
	}
	var text strings.Builder
	cand := j.Get("candidates.0")
	cand.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		switch {
		case p.Get("thought").Bool():
		case p.Get("functionCall").Exists():
			d.tools = true
			fc := p.Get("functionCall")
			id := strings.Clone(fc.Get("id").Str)
			if id == "" {
				id = format.NewID("call_")
			}
			b = d.r.ToolStart(b, id, strings.Clone(fc.Get("name").Str))
			b = d.r.ToolArgs(b, strings.Clone(format.ArgsText(fc.Get("args"))))
		case p.Get("text").Str != "":
			t := strings.Clone(p.Get("text").Str)
			text.WriteString(t)
			b = d.r.Text(b, t)
		}
		return true
	})
	if u := j.Get("usageMetadata"); u.Exists() {
		d.usage = geminiUsage(u)
	}
	if fr := cand.Get("finishReason"); fr.Str != "" {
		d.finished = true
		d.stop = geminiStop(fr.Str, d.tools)
	} else if !cand.Exists() && j.Get("promptFeedback.blockReason").Exists() {
		d.finished, d.stop = true, format.StopFilter
	}
	return b, text.String(), false
}

func (d *geminiDecoder) EOF(b []byte) ([]byte, error) {
	if !d.finished {
		return b, format.ErrTruncated
	}
	if !d.started {
		b = d.r.Start(b, format.NewID("chatcmpl-"), d.model, format.Tokens{})
	}
	return d.r.Finish(b, d.stop, "", d.usage), nil
}

// ---- Gemini (https://ai.google.dev/api/embeddings) ----

// geminiEmbed is Google AI Studio's embeddings API: one input → POST
// {prefix}:embedContent {"content": {"parts": [{"text"}]}} answering {"embedding":
// {"values"}}; several → POST {prefix}:batchEmbedContents {"requests": [...]} (at most 100
// each) answering {"embeddings": [{"values"}]}. dimensions → outputDimensionality, task_type
// → taskType. Google reports no token count for embeddings (usageMetadata.promptTokenCount is
// read when present).
type geminiEmbed struct {
	prefix string // {api_base}/v1beta/models/{model}
	model  string // "models/{model}"
}

const geminiEmbedBatch = 100

func (g geminiEmbed) request(b []byte, r *provider.EmbedRequest, text string) []byte {
	b = append(b, `{"model":`...)
	b = format.AppendJSONString(b, g.model)
	b = append(b, `,"content":{"parts":[{"text":`...)
	b = format.AppendJSONString(b, text)
	b = append(b, "}]}"...)
	if r.Dimensions() > 0 {
		b = append(b, `,"outputDimensionality":`...)
		b = strconv.AppendInt(b, r.Dimensions(), 10)
	}
	if r.TaskType() != "" {
		b = append(b, `,"taskType":`...)
		b = format.AppendJSONString(b, r.TaskType())
	}
	return append(b, '}')
}

func (g geminiEmbed) Calls(_ *provider.Deployment, r *provider.EmbedRequest) ([]provider.EmbedCall, error) {
	if len(r.Inputs()) == 1 {
		return []provider.EmbedCall{{URL: g.prefix + ":embedContent", Body: g.request(nil, r, r.Inputs()[0]), N: 1}}, nil
	}
	var calls []provider.EmbedCall
	for start := 0; start < len(r.Inputs()); start += geminiEmbedBatch {
		batch := r.Inputs()[start:min(start+geminiEmbedBatch, len(r.Inputs()))]
		b := []byte(`{"requests":[`)
		for i, t := range batch {
			if i > 0 {
				b = append(b, ',')
			}
			b = g.request(b, r, t)
		}
		calls = append(calls, provider.EmbedCall{URL: g.prefix + ":batchEmbedContents", Body: append(b, "]}"...), N: len(batch)})
	}
	return calls, nil
}

func (geminiEmbed) Parse(raw []byte, _ http.Header) ([]string, int64, error) {
	j := gjson.ParseBytes(raw)
	tokens := j.Get("usageMetadata.promptTokenCount").Int()
	if e := j.Get("embedding"); e.Exists() {
		v, err := provider.VectorOf(e.Get("values"), "embedding.values")
		return []string{v}, tokens, err
	}
	var out []string
	var err error
	j.Get("embeddings").ForEach(func(_, e gjson.Result) bool {
		var v string
		v, err = provider.VectorOf(e.Get("values"), "embeddings[].values")
		out = append(out, v)
		return err == nil
	})
	return out, tokens, err
}

// bytesView is b as a string without a copy, for gjson reads of a frame (valid until the
// frame's buffer is reused).
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
