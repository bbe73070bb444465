// Package format holds the client wire formats the gateway serves, around the error and
// usage types every format shares: the route formats ([Format]: OpenAI Chat Completions,
// Responses, Anthropic Messages, Embeddings and the passed-through ones), the neutral
// request and result ([Request], [Result]) with their translation — a parser and a renderer
// per format ([ParseRequest], [RenderChatRequest], [RenderMessagesRequest], [ParseResult],
// [RenderResult]), the stream renderers and decoders ([NewStreamRenderer], [NewDecoder]),
// [Replay] — following LiteLLM's translations (litellm/llms/anthropic/chat/transformation.py,
// litellm/llms/anthropic/experimental_pass_through/,
// litellm/responses/litellm_completion_transformation/), the guardrail text locations of
// each format ([MapRequestText], [MapResponseText], [MapStreamText]), usage extraction
// ([AnswerUsage], [AddStreamUsage]), per-format error bodies and stream error events
// ([ErrorEvent]), multipart/form-data bodies (transcriptions), and the JSON byte-edit helpers
// they share. No upstream call is made here: pkg/provider (transport, deployments, vendors)
// imports it; it imports no gateway package but jsonscan.
package format

import "strings"

// Format is the wire format of an inbound route (and of an upstream endpoint).
type Format int

// Inbound formats.
const (
	// FormatChat is OpenAI Chat Completions: POST /v1/chat/completions.
	FormatChat Format = iota + 1
	// FormatResponses is the OpenAI Responses API: POST /v1/responses.
	FormatResponses
	// FormatMessages is the Anthropic Messages API: POST /v1/messages.
	FormatMessages
	// FormatEmbeddings is OpenAI Embeddings: POST /v1/embeddings.
	FormatEmbeddings
	// FormatCompletions is OpenAI (legacy) Completions: POST /v1/completions, streamed like
	// chat ("data: [DONE]").
	FormatCompletions
	// FormatImages is OpenAI Images: POST /v1/images/generations.
	FormatImages
	// FormatModerations is OpenAI Moderations: POST /v1/moderations.
	FormatModerations
	// FormatSpeech is OpenAI text to speech: POST /v1/audio/speech (JSON in, audio bytes out).
	FormatSpeech
	// FormatTranscriptions is OpenAI speech to text: POST /v1/audio/transcriptions, a
	// multipart/form-data body whose "model" field names the model.
	FormatTranscriptions

	// formatNative is the upstream's own API when it is none of the above (Gemini, Bedrock
	// Converse, Ollama): every inbound format is translated to and from it.
	FormatNative
	NumFormats
)

// Formats lists every inbound format, in route order.
var Formats = []Format{FormatChat, FormatResponses, FormatMessages, FormatEmbeddings, FormatCompletions,
	FormatImages, FormatModerations, FormatSpeech, FormatTranscriptions}

// Passthrough reports whether f is only ever passed through to an OpenAI-compatible upstream
// (its body edited in "model" only), never translated: completions, images, moderations and
// audio.
func (f Format) Passthrough() bool { return f >= FormatCompletions && f < FormatNative }

// Streams reports whether requests of format f may ask for "stream": true.
func (f Format) Streams() bool {
	switch f {
	case FormatChat, FormatResponses, FormatMessages, FormatCompletions:
		return true
	}
	return false
}

// Multipart reports whether requests of format f are multipart/form-data, not JSON.
func (f Format) Multipart() bool { return f == FormatTranscriptions }

// String returns "chat", "responses", "messages" or "embeddings".
func (f Format) String() string {
	switch f {
	case FormatChat:
		return "chat"
	case FormatResponses:
		return "responses"
	case FormatMessages:
		return "messages"
	case FormatEmbeddings:
		return "embeddings"
	case FormatCompletions:
		return "completions"
	case FormatImages:
		return "images"
	case FormatModerations:
		return "moderations"
	case FormatSpeech:
		return "speech"
	case FormatTranscriptions:
		return "transcriptions"
	}
	return "unknown"
}

// Path returns the route path without the /v1 prefix, e.g. "/chat/completions".
func (f Format) Path() string {
	switch f {
	case FormatChat:
		return "/chat/completions"
	case FormatResponses:
		return "/responses"
	case FormatMessages:
		return "/messages"
	case FormatEmbeddings:
		return "/embeddings"
	case FormatCompletions:
		return "/completions"
	case FormatImages:
		return "/images/generations"
	case FormatModerations:
		return "/moderations"
	case FormatSpeech:
		return "/audio/speech"
	case FormatTranscriptions:
		return "/audio/transcriptions"
	}
	return ""
}

// RouteName is the prefix LiteLLM puts in front of route errors such as "Invalid model name
// passed in model=…": "/chat/completions", "/responses", "anthropic_messages", "/embeddings".
func (f Format) RouteName() string {
	if f == FormatMessages {
		return "anthropic_messages"
	}
	return f.Path()
}

// FormatForPath maps a request path (with or without the /v1 prefix) to its format.
func FormatForPath(path string) (Format, bool) {
	path = strings.TrimPrefix(path, "/v1")
	for _, f := range Formats {
		if f.Path() == path {
			return f, true
		}
	}
	return 0, false
}
