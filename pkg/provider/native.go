package provider

import (
	"lockstep/pkg/format"

	"github.com/tidwall/sjson"
)

// VertexAnthropicVersion is the anthropic_version Claude on Vertex AI requires in the body
// (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude).
const VertexAnthropicVersion = "vertex-2023-10-16"

// vertexAnthropicBody edits an Anthropic Messages body for Vertex AI: no "model" (it is in the
// URL) and "anthropic_version": "vertex-2023-10-16".
func vertexAnthropicBody(b []byte) ([]byte, error) {
	b, err := sjson.DeleteBytes(b, "model")
	if err != nil {
		return nil, format.BadRequest("%v", err)
	}
	if b, err = sjson.SetBytes(b, "anthropic_version", VertexAnthropicVersion); err != nil {
		return nil, format.BadRequest("%v", err)
	}
	return b, nil
}

// frameReader reads one frame of a streamed answer at a time. The slices returned by Current
// are valid until the next call to Next.
type frameReader interface {
	// Next reads the next frame; io.EOF when the body ended cleanly.
	Next() error
	// Current returns the frame's raw bytes, its event name (SSE event, event-stream
	// :event-type; nil for NDJSON) and its payload.
	Current() (raw, event, data []byte)
}
