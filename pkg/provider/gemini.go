package provider

import (
	"io"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// Google's Gemini API, as served by Google AI Studio (gemini/) and Vertex AI (vertex_ai/):
// POST …/models/{model}:generateContent, streamed by :streamGenerateContent?alt=sse (SSE frames,
// each a GenerateContentResponse; the last carries finishReason and usageMetadata)
// (https://ai.google.dev/api/generate-content). Mappings follow LiteLLM
// (litellm/llms/vertex_ai/gemini/transformation.py).
type geminiAPI struct{}

var _ nativeAPI = geminiAPI{}

// DefaultGeminiAPIBase is Google AI Studio's endpoint.
const DefaultGeminiAPIBase = "https://generativelanguage.googleapis.com"

// setupGemini finishes a gemini/<model> deployment: {api_base}/v1beta/models/{model}:generateContent
// with the key (api_key, env GEMINI_API_KEY) in the x-goog-api-key header.
func setupGemini(d *Deployment, _ gjson.Result) error {
	d.native = geminiAPI{}
	base := strings.TrimSuffix(d.APIBase, "/v1beta")
	prefix := base + "/v1beta/models/" + url.PathEscape(d.Model)
	d.urls[formatNative] = prefix + ":generateContent"
	d.streamURL = prefix + ":streamGenerateContent?alt=sse"
	d.embedder = geminiEmbed{prefix: prefix, model: "models/" + d.Model}
	h := d.header.Clone()
	if d.APIKey != "" {
		h.Set("x-goog-api-key", d.APIKey)
	}
	for k, v := range d.ExtraHeaders {
		h.Set(k, v)
	}
	d.header = h
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
	Name string  `json:"name"`
	Args rawJSON `json:"args"`
}

type geminiFuncResp struct {
	Name     string  `json:"name"`
	Response rawJSON `json:"response"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

func (geminiAPI) request(d *Deployment, r *request) ([]byte, error) {
	type funcDecl struct {
		Name        string  `json:"name"`
		Description string  `json:"description,omitempty"`
		Parameters  rawJSON `json:"parameters,omitempty"`
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
	}{Contents: make([]geminiContent, 0, len(r.messages))}
	if len(r.system) > 0 {
		sys := &geminiContent{}
		for _, s := range r.system {
			sys.Parts = append(sys.Parts, geminiPart{Text: s})
		}
		body.SystemInstruction = sys
	}
	names := map[string]string{} // tool call id → function name
	for _, m := range r.messages {
		c := geminiContent{Role: "user"}
		if m.role == "assistant" {
			c.Role = "model"
		}
		for _, p := range m.parts {
			switch p.kind {
			case partText:
				c.Parts = append(c.Parts, geminiPart{Text: p.text})
			case partImage:
				if mt, data, ok := base64Image(p.url); ok {
					c.Parts = append(c.Parts, geminiPart{InlineData: &geminiBlob{MimeType: mt, Data: data}})
				} else if strings.HasPrefix(p.url, "gs://") || strings.HasPrefix(p.url, "https://generativelanguage.googleapis.com/") {
					c.Parts = append(c.Parts, geminiPart{FileData: &geminiFile{FileURI: p.url}})
				} else {
					return nil, badRequest("messages: image URLs cannot be sent to provider %s; send a base64 data: URL or a gs:// URI", d.Provider)
				}
			case partToolUse:
				names[p.id] = p.name
				c.Parts = append(c.Parts, geminiPart{FunctionCall: &geminiCall{Name: p.name, Args: validObject(p.args)}})
			case partToolResult:
				name := names[p.id]
				if name == "" {
					name = p.id
				}
				resp := marshal(map[string]string{"content": p.text})
				if validJSONString(p.text) && gjson.Parse(p.text).IsObject() {
					resp = []byte(p.text)
				}
				c.Parts = append(c.Parts, geminiPart{FunctionResponse: &geminiFuncResp{Name: name, Response: resp}})
			}
		}
		if len(c.Parts) > 0 {
			body.Contents = append(body.Contents, c)
		}
	}
	gc := map[string]any{}
	if r.maxTokens > 0 {
		gc["maxOutputTokens"] = r.maxTokens
	}
	for k, v := range map[string]string{"temperature": r.temperature, "topP": r.topP, "topK": r.topK} {
		if v != "" {
			gc[k] = rawJSON(v)
		}
	}
	if len(r.stop) > 0 {
		gc["stopSequences"] = r.stop
	}
	if len(gc) > 0 {
		body.GenerationConfig = gc
	}
	if len(r.tools) > 0 {
		td := toolDecl{}
		for _, t := range r.tools {
			fd := funcDecl{Name: t.name, Description: t.description}
			if t.schema != "" {
				fd.Parameters = rawJSON(t.schema)
			}
			td.FunctionDeclarations = append(td.FunctionDeclarations, fd)
		}
		body.Tools = []toolDecl{td}
	}
	switch r.choice.mode {
	case "auto":
		body.ToolConfig = &toolConfig{callingConfig{Mode: "AUTO"}}
	case "any":
		body.ToolConfig = &toolConfig{callingConfig{Mode: "ANY"}}
	case "none":
		body.ToolConfig = &toolConfig{callingConfig{Mode: "NONE"}}
	case "tool":
		body.ToolConfig = &toolConfig{callingConfig{Mode: "ANY", AllowedFunctionNames: []string{r.choice.name}}}
	}
	return marshal(body), nil
}

// geminiStop maps a candidate's finishReason
// (https://ai.google.dev/api/generate-content#FinishReason); a STOP after function calls is a
// tool-use stop for the client.
func geminiStop(reason string, tools bool) stopReason {
	switch reason {
	case "MAX_TOKENS":
		return stopLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return stopFilter
	}
	if tools {
		return stopTool
	}
	return stopEnd
}

// geminiUsage reads usageMetadata: promptTokenCount (cached tokens included, as OpenAI counts
// them), candidatesTokenCount + thoughtsTokenCount, cachedContentTokenCount.
func geminiUsage(u gjson.Result) usage {
	return usage{in: u.Get("promptTokenCount").Int(), out: u.Get("candidatesTokenCount").Int() + u.Get("thoughtsTokenCount").Int(),
		cacheRead: u.Get("cachedContentTokenCount").Int()}
}

func (geminiAPI) result(raw []byte) (*result, error) {
	if !validJSON(raw) {
		return nil, errBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	r := &result{id: "chatcmpl-" + j.Get("responseId").Str, model: j.Get("modelVersion").Str}
	if r.id == "chatcmpl-" {
		r.id = newID("chatcmpl-")
	}
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
				id = newID("call_")
			}
			r.blocks = append(r.blocks, block{tool: true, id: id, name: fc.Get("name").Str, args: argsText(fc.Get("args"))})
		case p.Get("text").Type == gjson.String:
			if n := len(r.blocks); n > 0 && !r.blocks[n-1].tool {
				r.blocks[n-1].text += p.Get("text").Str
			} else {
				r.blocks = append(r.blocks, block{text: p.Get("text").Str})
			}
		}
		return true
	})
	r.stop = geminiStop(cand.Get("finishReason").Str, tools)
	if !cand.Exists() && j.Get("promptFeedback.blockReason").Exists() {
		r.stop = stopFilter
	}
	r.usage = geminiUsage(j.Get("usageMetadata"))
	return r, nil
}

func (geminiAPI) frames(body io.Reader) frameReader { return newSSEReader(body) }

func (geminiAPI) decoder(r renderer, model string) decoder {
	return &geminiDecoder{r: r, model: model}
}

// geminiDecoder reads streamGenerateContent?alt=sse: each frame a GenerateContentResponse
// with the next parts; the stream ends with the body, after a frame with a finishReason.
type geminiDecoder struct {
	r        renderer
	model    string
	started  bool
	finished bool
	tools    bool
	stop     stopReason
	usage    usage
}

func (d *geminiDecoder) frame(b []byte, _, data []byte) ([]byte, string, bool) {
	if len(data) == 0 || data[0] != '{' {
		return b, "", false
	}
	j := gjson.Parse(bytesView(data))
	if e := j.Get("error"); e.Exists() {
		status := int(e.Get("code").Int())
		if status < 400 || status > 599 {
			status = 500
		}
		return d.r.fail(b, status, e.Get("message").String()), "", true
	}
	if !d.started {
		d.started = true
		id := "chatcmpl-" + j.Get("responseId").Str
		if id == "chatcmpl-" {
			id = newID("chatcmpl-")
		}
		m := strings.Clone(j.Get("modelVersion").Str)
		if m == "" {
			m = d.model
		}
		b = d.r.start(b, strings.Clone(id), m, usage{})
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
				id = newID("call_")
			}
			b = d.r.toolStart(b, id, strings.Clone(fc.Get("name").Str))
			b = d.r.toolArgs(b, strings.Clone(argsText(fc.Get("args"))))
		case p.Get("text").Str != "":
			t := strings.Clone(p.Get("text").Str)
			text.WriteString(t)
			b = d.r.text(b, t)
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
		d.finished, d.stop = true, stopFilter
	}
	return b, text.String(), false
}

func (d *geminiDecoder) eof(b []byte) ([]byte, error) {
	if !d.finished {
		return b, errTruncated
	}
	if !d.started {
		b = d.r.start(b, newID("chatcmpl-"), d.model, usage{})
	}
	return d.r.finish(b, d.stop, "", d.usage), nil
}
