package format

import (
	"net/http"
	"strings"
)

// ---- answers ----

// xlate is what translating a request decided that its answer needs: the fields dropped
// (for the header), the namespace tools to restore, and whether structured output comes
// back as the forced tool's call.
type xlate struct {
	dropped  []string
	ns       map[string]nsName
	jsonTool bool
}

func (x *xlate) setHeader(h http.Header) {
	if x == nil || h == nil || len(x.dropped) == 0 {
		return
	}
	h[DroppedHeader] = []string{strings.Join(x.dropped, ",")}
}

// fixResult rewrites an upstream answer for the client: the forced structured-output tool's
// call becomes the message text (LiteLLM's _transform_response_for_json_mode; the stop
// reason a natural end), flattened namespace tool names are split back.
func (x *xlate) fixResult(res *result) {
	if x == nil {
		return
	}
	for i := range res.blocks {
		b := &res.blocks[i]
		if !b.tool {
			continue
		}
		if x.jsonTool && b.name == jsonToolName {
			*b = block{text: b.args}
			if res.stop == stopTool {
				res.stop = stopEnd
			}
			continue
		}
		if n, ok := x.ns[b.name]; ok {
			b.ns, b.name = n.ns, n.name
		}
	}
}

// thinkingSigPrefix marks a Responses reasoning item's encrypted_content as an Anthropic
// thinking signature carried by the gateway (the thinking text is the item's summary), so
// that a Responses client sending the item back (Codex: include
// reasoning.encrypted_content) returns the signed thinking block to Anthropic.
const thinkingSigPrefix = "lockstep.anthropic.thinking:"

// reasoner is a renderer that streams reasoning (chat reasoning_content, Anthropic
// thinking blocks); the Responses and completions renderers do not carry it.
type reasoner interface {
	thinking(b []byte, delta string) []byte
	signature(b []byte, sig string) []byte
}

func streamThinking(r renderer, b []byte, delta string) []byte {
	if t, ok := r.(reasoner); ok {
		return t.thinking(b, delta)
	}
	return b
}

func streamSignature(r renderer, b []byte, sig string) []byte {
	if t, ok := r.(reasoner); ok {
		return t.signature(b, sig)
	}
	return b
}

// renderer wraps r so that a stream is fixed as fixResult fixes an answer; r itself when
// nothing needs fixing.
func (x *xlate) renderer(r renderer) renderer {
	if x == nil || (!x.jsonTool && len(x.ns) == 0) {
		return r
	}
	return &fixRenderer{renderer: r, x: x}
}

// fixRenderer streams the forced structured-output tool's arguments as text and restores
// namespace tool names (Responses output items get their "namespace" member).
type fixRenderer struct {
	renderer
	x      *xlate
	asText bool // the open tool call is the structured-output tool
	sawJS  bool // a structured-output call was streamed as text
}

func (f *fixRenderer) toolStart(b []byte, id, name string) []byte {
	f.asText = f.x.jsonTool && name == jsonToolName
	if f.asText {
		f.sawJS = true
		return b
	}
	if n, ok := f.x.ns[name]; ok {
		if rr, ok := f.renderer.(*responsesRenderer); ok {
			return rr.addItem(b, block{tool: true, id: id, name: n.name, ns: n.ns})
		}
		name = n.name
	}
	return f.renderer.toolStart(b, id, name)
}

func (f *fixRenderer) toolArgs(b []byte, delta string) []byte {
	if f.asText {
		return f.renderer.text(b, delta)
	}
	return f.renderer.toolArgs(b, delta)
}

func (f *fixRenderer) text(b []byte, delta string) []byte {
	f.asText = false
	return f.renderer.text(b, delta)
}

func (f *fixRenderer) thinking(b []byte, delta string) []byte {
	return streamThinking(f.renderer, b, delta)
}

func (f *fixRenderer) signature(b []byte, sig string) []byte {
	return streamSignature(f.renderer, b, sig)
}

func (f *fixRenderer) finish(b []byte, stop stopReason, stopSeq string, u usage) []byte {
	if f.sawJS && stop == stopTool {
		stop = stopEnd
	}
	return f.renderer.finish(b, stop, stopSeq, u)
}

// usageTap is a renderer that records the usage a decoder reports (start: the input counted
// up front, as Anthropic's message_start; finish: the final figures) in its stream.
type usageTap struct {
	renderer
	s UsageSink
}

// UsageSink receives the usage a translated stream reports: at its start (final false: the
// input counted up front, as Anthropic's message_start) and at its finish (final true).
type UsageSink interface {
	TapUsage(u Usage, final bool)
}

// NewStreamRenderer returns the renderer of a translated stream answered in format in
// (includeUsage: a chat client's stream_options.include_usage), with the fixes x asks for
// (nil: none), reporting its usage to sink.
func NewStreamRenderer(in Format, includeUsage bool, x *xlate, sink UsageSink) Renderer {
	return Renderer{usageTap{x.renderer(newRenderer(in, includeUsage)), sink}}
}

// NewDecoder returns the decoder of an upstream stream of format up (messages; else chat)
// driving r.
func NewDecoder(up Format, r Renderer) Decoder {
	if up == FormatMessages {
		return newMessagesDecoder(r.r)
	}
	return newChatDecoder(r.r)
}

func (t usageTap) start(b []byte, id, model string, u usage) []byte {
	t.s.TapUsage(u.public(), false)
	return t.renderer.start(b, id, model, u)
}

func (t usageTap) finish(b []byte, stop stopReason, stopSeq string, u usage) []byte {
	t.s.TapUsage(u.public(), true)
	return t.renderer.finish(b, stop, stopSeq, u)
}

// SetStream sets whether the call streams (r.Stream(): which endpoint the request is rendered
// for).
func (r *request) SetStream(stream bool) { r.stream = stream }

// Fixes is what the answer to r needs after translation (see [AnswerFixes]); nil when nothing.
func (r *request) Fixes() *xlate {
	if len(r.dropped) > 0 || len(r.ns) > 0 || r.jsonTool {
		return &xlate{dropped: r.dropped, ns: r.ns, jsonTool: r.jsonTool}
	}
	return nil
}
