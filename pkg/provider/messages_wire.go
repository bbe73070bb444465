package provider

import (
	"io"
	"net/http"
	"strings"

	"lockstep/pkg/format"
)

// MessagesWire is a vendor's Anthropic-native Messages endpoint beside its own [Wire]: Claude
// on Amazon Bedrock's InvokeModel (LiteLLM's bedrock/invoke route for /v1/messages,
// litellm/llms/bedrock/messages/invoke_transformations). /v1/messages requests pass through
// it — the body keeps thinking, cache_control, tool_use and every other Anthropic member, with
// only the edits Body makes — while chat and responses keep going through the Wire.
type MessagesWire interface {
	// Body edits a client's Messages body (its model already the deployment's) for the
	// endpoint; stream tells which endpoint it is for, in is the client's request header (nil
	// when there is none). dropped names the members it removed (the answer's
	// [format.DroppedHeader]). Errors are *format.RequestError.
	Body(body []byte, stream bool, in http.Header) (out []byte, dropped []string, err error)
	// Frames reads the endpoint's streamed answer as Anthropic SSE frames: each Current is
	// the raw frame ("event: <type>\ndata: <json>\n\n") a client receives verbatim, its event
	// name and its JSON. An error the stream reports is a *UpstreamError from Next.
	Frames(body io.Reader) FrameReader
}

// SetMessagesWire makes /v1/messages requests go to url (streamURL for streams) through mw,
// passed through rather than translated; the deployment's Wire still serves the other routes.
func (s *Setup) SetMessagesWire(url, streamURL string, mw MessagesWire) {
	s.d.messages = mw
	s.d.urls[format.FormatMessages] = url
	s.d.messagesStream = streamURL
}

// messagesBody applies the deployment's MessagesWire edits to a passed-through Messages body
// (body itself when there is none or up is another format), naming what they dropped in
// h.Out's [format.DroppedHeader].
func (d *Deployment) messagesBody(up format.Format, stream bool, body []byte, h Headers) ([]byte, error) {
	if d.messages == nil || up != format.FormatMessages {
		return body, nil
	}
	out, dropped, err := d.messages.Body(body, stream, h.In)
	if err == nil && len(dropped) > 0 && h.Out != nil {
		h.Out[format.DroppedHeader] = []string{strings.Join(dropped, ",")}
	}
	return out, err
}
