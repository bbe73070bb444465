package format

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// ---- the neutral request, read by a Wire ----

// Request is a client's request in neutral form.
type Request = request

// ParseRequest reads a client request body of format f (chat, responses or messages) into
// neutral form, as a call translating it does. Errors are *RequestError naming what is
// malformed.
func ParseRequest(f Format, body []byte) (*Request, error) {
	switch f {
	case FormatChat:
		return parseChatRequest(body)
	case FormatResponses:
		return parseResponsesRequest(body)
	case FormatMessages:
		return parseMessagesRequest(body)
	}
	return nil, BadRequest("%s requests have no neutral form", f.RouteName())
}

// Message is one turn of a [Request]: a role and its parts.
type Message = message

// Part is one piece of a [Message].
type Part = part

// PartKind is what a [Part] holds.
type PartKind = partKind

// The kinds of [Part].
const (
	PartText       PartKind = partText       // Text
	PartImage      PartKind = partImage      // URL: http(s) or data: URL
	PartToolUse    PartKind = partToolUse    // ID, Name, Args (JSON text)
	PartToolResult PartKind = partToolResult // ID (the tool use's), Text (its content), IsError
)

// Tool is a function the model may call.
type Tool = tool

// System is the system prompt, one entry per system block.
func (r *request) System() []string { return r.system }

// Messages are the turns, user and assistant, in order.
func (r *request) Messages() []Message { return r.messages }

// Stream reports whether the call streams.
func (r *request) Stream() bool { return r.stream }

// Tools are the functions offered.
func (r *request) Tools() []Tool { return r.tools }

// ToolChoice is the tool choice: mode "", "auto", "any" (required), "none" or "tool" (then
// name is the tool).
func (r *request) ToolChoice() (mode, name string) { return r.choice.mode, r.choice.name }

// MaxTokens is the output token limit, 0 when not given.
func (r *request) MaxTokens() int64 { return r.maxTokens }

// Temperature, TopP and TopK are the sampling parameters as raw JSON numbers, "" when not
// given.
func (r *request) Temperature() string { return r.temperature }

// TopP: see [Request.Temperature].
func (r *request) TopP() string { return r.topP }

// TopK: see [Request.Temperature].
func (r *request) TopK() string { return r.topK }

// StopSequences are the stop sequences.
func (r *request) StopSequences() []string { return r.stop }

// OutputFormat is the structured output asked for, from any client format (chat
// response_format, Responses text.format, Messages output_config.format / output_format):
// kind "" (free text), "json_object" (any JSON object; schema "") or "json_schema" (schema:
// the client's JSON schema text, possibly "" when it gave none).
func (r *request) OutputFormat() (kind, schema string) { return r.format.kind, r.format.schema }

// JSONToolName is the forced tool that carries structured output to an upstream without a
// native form (LiteLLM's RESPONSE_FORMAT_TOOL_NAME, "json_tool_call").
const JSONToolName = jsonToolName

// UseJSONTool tells the gateway that the provider.OutputFormatWire rendered structured output as
// the forced [JSONToolName] tool: the answer's call of that tool reaches the client as the
// message text, its tool_use stop reason a natural end (LiteLLM's
// _transform_response_for_json_mode), plain and streamed.
func (r *request) UseJSONTool() { r.jsonTool = true }

// Role is "user" or "assistant".
func (m message) Role() string { return m.role }

// Parts are the message's parts in order.
func (m message) Parts() []Part { return m.parts }

// Kind is what the part holds.
func (p part) Kind() PartKind { return p.kind }

// Text is a text part's text, or a tool result's content.
func (p part) Text() string { return p.text }

// URL is an image part's URL.
func (p part) URL() string { return p.url }

// ID is a tool use's id, or the id of the tool use a tool result answers.
func (p part) ID() string { return p.id }

// Name is a tool use's tool name.
func (p part) Name() string { return p.name }

// Args are a tool use's arguments, JSON text.
func (p part) Args() string { return p.args }

// IsError reports a tool result that is an error.
func (p part) IsError() bool { return p.err }

// Name is the tool's name.
func (t tool) Name() string { return t.name }

// Description is the tool's description.
func (t tool) Description() string { return t.description }

// Schema is the tool's parameters JSON schema text, "" when none.
func (t tool) Schema() string { return t.schema }

// ---- the neutral answer, built by a Wire ----

// Result is an assistant answer in neutral form (see [NewResult]).
type Result = result

// Stop is why generation ended.
type Stop = stopReason

// The stop reasons.
const (
	StopEnd      Stop = stopEnd      // natural end
	StopLength   Stop = stopLength   // token limit
	StopTool     Stop = stopTool     // the model called tools
	StopSequence Stop = stopSequence // a stop sequence matched
	StopFilter   Stop = stopFilter   // refused / filtered
)

// Tokens is a call's token usage in OpenAI's sense: In counts every prompt token, cached
// ones included (CacheRead read from the cache, CacheWrite written to it); Out the generated
// ones.
type Tokens struct {
	In, Out, CacheRead, CacheWrite int64
}

func (t Tokens) usage() usage {
	return usage{in: t.In, out: t.Out, cacheRead: t.CacheRead, cacheWrite: t.CacheWrite}
}

// NewResult starts an answer with the upstream's id and model.
func NewResult(id, model string) *Result { return &result{id: id, model: model} }

// AddText appends a text block.
func (r *result) AddText(text string) { r.blocks = append(r.blocks, block{text: text}) }

// AppendText adds text to the last block when it is a text block, else appends a text block
// (an upstream that splits one text over several parts).
func (r *result) AppendText(text string) {
	if n := len(r.blocks); n > 0 && !r.blocks[n-1].tool {
		r.blocks[n-1].text += text
		return
	}
	r.blocks = append(r.blocks, block{text: text})
}

// Stop is why generation ended.
func (r *result) Stop() Stop { return r.stop }

// Tokens is the answer's token usage.
func (r *result) Tokens() Tokens {
	return Tokens{In: r.usage.in, Out: r.usage.out, CacheRead: r.usage.cacheRead, CacheWrite: r.usage.cacheWrite}
}

// RenderResult renders an answer as a non-streaming body of client format f (chat,
// responses, messages, completions), as a translated call answers.
func RenderResult(f Format, r *Result) []byte { return render(f, r) }

// AddToolCall appends a tool call (args: JSON text).
func (r *result) AddToolCall(id, name, args string) {
	r.blocks = append(r.blocks, block{tool: true, id: id, name: name, args: args})
}

// SetStop sets why generation ended.
func (r *result) SetStop(s Stop) { r.stop = s }

// SetUsage sets the token usage.
func (r *result) SetUsage(t Tokens) { r.usage = t.usage() }

// Renderer writes a streamed answer in the client's format; a [Decoder] drives it. Each
// method appends the frames it produces to b and returns them.
type Renderer struct{ r renderer }

// Start opens the answer (id, model, the usage known so far).
func (r Renderer) Start(b []byte, id, model string, t Tokens) []byte {
	return r.r.start(b, id, model, t.usage())
}

// Text adds a text delta.
func (r Renderer) Text(b []byte, delta string) []byte { return r.r.text(b, delta) }

// ToolStart opens a tool call.
func (r Renderer) ToolStart(b []byte, id, name string) []byte { return r.r.toolStart(b, id, name) }

// ToolArgs adds a delta of the open tool call's arguments (JSON text).
func (r Renderer) ToolArgs(b []byte, delta string) []byte { return r.r.toolArgs(b, delta) }

// Finish ends the answer: why, the stop sequence matched (or ""), the final usage.
func (r Renderer) Finish(b []byte, stop Stop, stopSeq string, t Tokens) []byte {
	return r.r.finish(b, stop, stopSeq, t.usage())
}

// Fail ends the answer with an error event of the given status and message.
func (r Renderer) Fail(b []byte, status int, msg string) []byte { return r.r.fail(b, status, msg) }

// ---- JSON helpers shared by the vendors ----

// Marshal is json.Marshal of a value that always encodes (the vendors' own body structs).
func Marshal(v any) []byte { return marshal(v) }

// ValidObject is JSON text s as a raw JSON object, "{}" when s is not one (tool arguments).
func ValidObject(s string) json.RawMessage { return validObject(s) }

// SchemaOrEmpty is a tool's schema, or the empty object schema when it has none.
func SchemaOrEmpty(s string) string { return schemaOrEmpty(s) }

// NewID is a fresh id with prefix ("chatcmpl-", "call_"), for upstreams that send none.
func NewID(prefix string) string { return newID(prefix) }

// Base64Image returns the media type and payload of a base64 data: URL; ok is false for any
// other URL.
func Base64Image(u string) (mediaType, data string, ok bool) { return base64Image(u) }

// ArgsText returns tool-call arguments as JSON text: an object as is, a string (some servers
// send the JSON encoded) as its content, "{}" when absent.
func ArgsText(v gjson.Result) string { return argsText(v) }

// AppendJSONStrings appends ss as a JSON array of strings.
func AppendJSONStrings(dst []byte, ss []string) []byte { return appendStrings(dst, ss) }

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

// Decoder reads a vendor's stream frame by frame and drives a [Renderer].
type Decoder interface {
	// Frame handles one frame (its event name, nil when the framing has none, and its
	// payload). It appends the inbound-format frames it produces to b and returns them, the
	// text delta carried, and done when the upstream stream is complete.
	Frame(b []byte, event, data []byte) (out []byte, text string, done bool)
	// EOF handles the end of the body before a terminal frame: the frames that end the stream
	// properly, or an error ([ErrTruncated]).
	EOF(b []byte) ([]byte, error)
}

// Entry points for pkg/provider, which calls the translation from outside this package.

// AnswerFixes is what translating a request decided that its answer needs (see
// [Request.Fixes]): the dropped-fields header, namespace tools to restore, structured output
// carried as the forced tool's call. A nil *AnswerFixes changes nothing.
type AnswerFixes = xlate

// ErrBadUpstreamJSON is an upstream answer that is not a JSON object.
var ErrBadUpstreamJSON = errBadUpstreamJSON

// ParseJSONObject parses body as one JSON object, or returns a [BadRequest] naming what is
// wrong with it.
func ParseJSONObject(body []byte) (gjson.Result, error) { return parseJSONObject(body) }

// PassthroughDone reports whether the verbatim upstream SSE frame (event, data) of format f
// ends the stream: [DONE] (chat, completions), message_stop (Anthropic),
// response.completed/failed/incomplete (Responses).
func PassthroughDone(f Format, event, data []byte) bool { return passthroughDone(f, event, data) }

// PassthroughText is the text delta carried by the verbatim upstream SSE frame (event, data)
// of format f; "" when it carries none.
func PassthroughText(f Format, event, data []byte) string { return passthroughText(f, event, data) }

// AnthropicNativeJSON reports whether an Anthropic model takes output_config.format
// (structured outputs, per Anthropic's structured outputs guide) rather than the forced
// json_tool_call tool.
func AnthropicNativeJSON(model string) bool { return anthropicNativeJSON(model) }

// RenderChatRequest renders r as a chat completions request body for model;
// maxCompletionTokens sends max_completion_tokens instead of max_tokens.
func RenderChatRequest(r *Request, model string, maxCompletionTokens bool) []byte {
	return renderChatRequest(r, model, maxCompletionTokens)
}

// RenderMessagesRequest renders r as an Anthropic messages request body for model;
// nativeJSON sends structured output as output_config.format rather than the forced tool.
func RenderMessagesRequest(r *Request, model string, nativeJSON bool) []byte {
	return renderMessagesRequest(r, model, nativeJSON)
}

// Text is the answer's text: its text blocks joined (tool calls and thinking left out).
func (r *result) Text() string { return r.text() }

// SetHeader sets the dropped-fields header ([DroppedHeader]) on h when the translation
// dropped any field; nothing on a nil x or h.
func (x *xlate) SetHeader(h http.Header) { x.setHeader(h) }

// FixResult rewrites an upstream answer for the client: the forced structured-output tool's
// call becomes the message text, flattened namespace tool names are split back; nothing on a
// nil x.
func (x *xlate) FixResult(res *Result) { x.fixResult(res) }

// NewRenderer returns the renderer of a stream answered in format in (includeUsage: a chat
// client's stream_options.include_usage) with no fixes and no usage reporting, for a
// [Decoder] driven directly (the stream benchmarks and fuzz targets of pkg/provider).
func NewRenderer(in Format, includeUsage bool) Renderer {
	return Renderer{newRenderer(in, includeUsage)}
}
