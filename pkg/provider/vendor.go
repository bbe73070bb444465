package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// Vendors: an upstream API family beyond the built-in ones (OpenAI's API and its compatible
// providers, Anthropic's) is a Vendor, written in a sub-package of pkg/provider
// (pkg/provider/ollama) against the small API of this file, and registered explicitly by the
// process that builds deployments: provider.NewBuilder(policy, ollama.Vendor, …) in
// cmd/gateway. Nothing registers itself: a prefix no Vendor given to the Builder names is an
// unknown provider.

// Vendor describes one upstream API family served under one or more litellm_params.model
// prefixes (LiteLLM's provider names).
type Vendor struct {
	// Names are the litellm_params.model prefixes (and custom_llm_provider values) it serves,
	// e.g. "ollama", "ollama_chat".
	Names []string
	// APIBase is the default api_base; "" means api_base is required unless DerivedBase.
	APIBase string
	// KeyEnv and BaseEnv are the environment variables LiteLLM reads when api_key / api_base
	// are not given ("" for none). KeyEnv obeys the secrets policy for database objects.
	KeyEnv, BaseEnv string
	// DerivedBase: api_base may be omitted; Setup derives it (from a region, a project, …).
	DerivedBase bool
	// Setup finishes a deployment once the common litellm_params fields are read: it sets the
	// Wire (the upstream's own API, translated from every inbound format), its endpoints, the
	// embeddings API and the headers. Errors name the litellm_params field.
	Setup func(s *Setup) error
}

// providerSpec returns the deployment spec the Builder keeps for v.
func (v Vendor) providerSpec() providerSpec {
	setup := v.Setup
	return providerSpec{wire: wireNative, apiBase: v.APIBase, keyEnv: v.KeyEnv, baseEnv: v.BaseEnv, derivedBase: v.DerivedBase,
		setup: func(d *Deployment, p gjson.Result) error {
			s := &Setup{d: d, p: p}
			if setup != nil {
				if err := setup(s); err != nil {
					return err
				}
			}
			s.finish()
			return nil
		}}
}

// withVendors returns the built-in providers plus vendors. Errors: a name given twice.
func withVendors(vendors []Vendor) (map[string]providerSpec, error) {
	out := make(map[string]providerSpec, len(providers)+len(vendors))
	for name, spec := range providers {
		out[name] = spec
	}
	for _, v := range vendors {
		spec := v.providerSpec()
		for _, name := range v.Names {
			if _, dup := out[name]; dup || name == "" {
				return nil, fmt.Errorf("provider %q registered twice", name)
			}
			out[name] = spec
		}
	}
	return out, nil
}

// Setup is what a [Vendor]'s Setup sees of the deployment being built.
type Setup struct {
	d      *Deployment
	p      gjson.Result
	header http.Header // nil until SetHeader
}

// Deployment is the deployment being built: its exported fields (Model, APIBase, APIKey,
// ExtraHeaders, …) are read; they are not to be changed.
func (s *Setup) Deployment() *Deployment { return s.d }

// Param reads an optional string member of litellm_params ("" when absent or null),
// resolving "os.environ/NAME" under the deployment's secrets policy. Errors name the field.
func (s *Setup) Param(field string) (string, error) { return s.d.paramStr(s.p, field) }

// ParamOrEnv is [Setup.Param] falling back to the environment variable env when the field
// is absent or empty (env "": none).
func (s *Setup) ParamOrEnv(field, env string) (string, error) { return s.d.paramOrEnv(s.p, field, env) }

// ImplicitChain checks that the deployment may use a credential chain the provider searches
// when litellm_params has no credential (the AWS default chain, Google Application Default
// Credentials): a database object only when the secrets policy allows env (its main
// variable); a config-file object always. Errors name field and env.
func (s *Setup) ImplicitChain(field, env string) error { return s.d.implicitChain(field, env) }

// AddSecrets adds credentials beyond api_key (a secret access key, a session token) that are
// redacted from error texts.
func (s *Setup) AddSecrets(secrets ...string) {
	s.d.extraSecrets = append(s.d.extraSecrets, secrets...)
}

// SetAPIBase replaces the deployment's APIBase (one derived from a region, a project, …).
func (s *Setup) SetAPIBase(base string) { s.d.APIBase = base }

// SetModel replaces the deployment's upstream Model name (a route hint prefix dropped).
func (s *Setup) SetModel(model string) { s.d.Model = model }

// SetSigner makes sg authenticate every upstream request once its body is final.
func (s *Setup) SetSigner(sg Signer) { s.d.signer = sg }

// SetWire makes w the deployment's upstream API, called at url (streamURL for streaming
// calls when the API has its own; "" for the same url).
func (s *Setup) SetWire(w Wire, url, streamURL string) {
	s.d.native = w
	s.d.urls[formatNative] = url
	s.d.streamURL = streamURL
}

// SetAnthropicWire makes the deployment speak Anthropic's Messages API at url (streamURL for
// streams) as Claude on Vertex AI does: the body carries anthropic_version
// "vertex-2023-10-16" ([VertexAnthropicVersion]) and no "model" (the model is in the URL).
func (s *Setup) SetAnthropicWire(url, streamURL string) {
	s.d.wire, s.d.vertexAnthropic, s.d.native = wireAnthropic, true, nil
	s.d.urls[FormatMessages] = url
	s.d.streamURL = streamURL
}

// SetEmbedder gives the deployment the embeddings API e (/v1/embeddings is served through it).
// A nil e leaves the deployment without one.
func (s *Setup) SetEmbedder(e Embedder) {
	s.d.embedder = e // a nil interface when e is nil
}

// SetHeader sets a header of every upstream request; litellm_params.extra_headers still win.
func (s *Setup) SetHeader(key, value string) {
	if s.header == nil {
		s.header = s.d.header.Clone()
	}
	s.header.Set(key, value)
}

func (s *Setup) finish() {
	if s.header == nil {
		return
	}
	for k, v := range s.d.ExtraHeaders {
		s.header.Set(k, v)
	}
	s.d.header = s.header
}

// Wire is a vendor's upstream API: the neutral request rendered as its body, its answer and
// its stream read back. Every inbound format (chat, responses, messages) reaches it through
// the neutral [Request] and [Result], as for the built-in families.
type Wire interface {
	// Request renders r as the upstream's body (r.Stream() tells which endpoint it is for).
	// Errors are *UpstreamError (400: the request cannot be sent to this provider; see
	// [BadRequest]).
	Request(d *Deployment, r *Request) ([]byte, error)
	// Result parses a non-streaming answer.
	Result(raw []byte) (*Result, error)
	// Frames splits a streamed answer into frames (SSE, NDJSON lines, …; see
	// [NewSSEReader]).
	Frames(body io.Reader) FrameReader
	// Decoder translates the frames into calls of r; model names the answer when the
	// upstream does not.
	Decoder(r Renderer, model string) Decoder
}

// OutputFormatWire is a [Wire] that renders the request's structured output
// ([Request.OutputFormat]) in its own form; for a Wire without it the client's member
// (response_format, text.format, output_config.format) is dropped and named in
// [DroppedHeader].
type OutputFormatWire interface {
	Wire
	RendersOutputFormat()
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

// Signer authenticates one upstream request after its body is final (an AWS Signature
// Version 4, an OAuth2 bearer token). It may set headers on req (its Header is a private
// copy). Errors are *UpstreamError.
type Signer interface {
	Sign(ctx context.Context, req *http.Request, body []byte) error
}

// Lazy is a value found on first use (a credential chain): failures are never kept, the
// first success is kept for good; reads after it are one atomic load.
type Lazy[T any] = lazyValue[T]

// NewLazy returns the Lazy value find finds.
func NewLazy[T any](find func() (T, error)) *Lazy[T] { return &lazyValue[T]{find: find} }

// Get returns the value, finding it if no lookup succeeded yet.
func (l *lazyValue[T]) Get() (T, error) { return l.get() }

// decoderAdapter is a Wire's Decoder as the client's stream calls it.
type decoderAdapter struct{ d Decoder }

func (a decoderAdapter) frame(b []byte, event, data []byte) ([]byte, string, bool) {
	return a.d.Frame(b, event, data)
}
func (a decoderAdapter) eof(b []byte) ([]byte, error) { return a.d.EOF(b) }

// FrameReader reads one frame of a streamed answer at a time (see [NewSSEReader]).
type FrameReader = frameReader

// NewSSEReader splits a body of server-sent events (the SSE framing of the HTML Living
// Standard): each frame's event name and joined data lines.
func NewSSEReader(r io.Reader) FrameReader { return newSSEReader(r) }

// ErrTruncated is a stream that ended before the upstream said it was complete (502).
var ErrTruncated = errTruncated

// ErrBadUpstreamJSON is an answer that is not a JSON object.
var ErrBadUpstreamJSON = errBadUpstreamJSON

// BadRequest is a 400 returned before any upstream call: the client's request cannot be
// translated for the provider.
func BadRequest(format string, args ...any) *UpstreamError { return badRequest(format, args...) }

// ---- the neutral request, read by a Wire ----

// Request is a client's request in neutral form.
type Request = request

// ParseRequest reads a client request body of format f (chat, responses or messages) into
// neutral form, as a call translating it does. Errors are 400 *UpstreamError naming what is
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
	return nil, badRequest("%s requests have no neutral form", f.RouteName())
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

// UseJSONTool tells the gateway that the [OutputFormatWire] rendered structured output as
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

// ---- embeddings ----

// Embedder is a vendor's embeddings API: /v1/embeddings requests are read into an
// [EmbedRequest], sent as the calls Calls returns, and answered as an OpenAI embedding list.
type Embedder interface {
	// Calls turns the request into upstream calls, each covering the next N inputs in order.
	Calls(d *Deployment, r *EmbedRequest) ([]EmbedCall, error)
	// Parse reads one call's answer: one raw JSON array of numbers per input it covered (see
	// [VectorOf]), and the prompt tokens the provider reported (0 when none).
	Parse(raw []byte, h http.Header) (vectors []string, tokens int64, err error)
}

// EmbedRequest is an OpenAI embeddings request.
type EmbedRequest = embedRequest

// Inputs are the texts to embed.
func (r *embedRequest) Inputs() []string { return r.inputs }

// TaskType is task_type (Gemini) or input_type (Cohere), "" when absent.
func (r *embedRequest) TaskType() string { return r.taskType }

// Dimensions is the dimensions asked, 0 for the model's default.
func (r *embedRequest) Dimensions() int64 { return r.dimensions }

// EmbedCall is one upstream embeddings call: POST Body to URL, covering N inputs.
type EmbedCall struct {
	URL  string
	Body []byte
	N    int
}

// VectorOf returns the raw JSON array of numbers v, or an error naming what (e.g.
// "embeddings[]") is not one.
func VectorOf(v gjson.Result, what string) (string, error) { return vectorOf(v, what) }

// ---- JSON helpers shared by the vendors ----

// ValidJSON reports whether b is valid JSON within the gateway's nesting bound (jsonscan),
// the check every upstream answer gets before it is parsed.
func ValidJSON(b []byte) bool { return validJSON(b) }

// ValidJSONString is [ValidJSON] of a string.
func ValidJSONString(s string) bool { return validJSONString(s) }

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

// AppendJSONString appends s as a JSON string.
func AppendJSONString(dst []byte, s string) []byte { return appendJSONString(dst, s) }

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
