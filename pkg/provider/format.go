// Package provider calls upstream LLM APIs on behalf of the gateway and translates between
// the wire formats clients speak and the ones upstreams serve.
//
// Four inbound formats exist (see [Format]): OpenAI Chat Completions, OpenAI Responses, Anthropic
// Messages and OpenAI Embeddings. Upstreams speak either the OpenAI API (openai and the
// OpenAI-compatible providers) or the Anthropic Messages API. When the inbound format is one
// the upstream serves natively, the request is passed through: only the "model" value is
// replaced, by a byte edit, and answers (streamed SSE frames included) are forwarded verbatim.
// Otherwise the request is translated into the upstream's format and the answer back, streams
// event by event, following LiteLLM's translations (litellm/llms/anthropic/chat/transformation.py
// and litellm/llms/anthropic/experimental_pass_through/, litellm/responses/litellm_completion_transformation/).
//
// Deployments come from a model row's litellm_params (see [NewDeployment]); a deployment with a
// mock_response answers locally in the inbound format without any network call.
package provider

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
)

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
	switch strings.TrimPrefix(path, "/v1") {
	case "/chat/completions":
		return FormatChat, true
	case "/responses":
		return FormatResponses, true
	case "/messages":
		return FormatMessages, true
	case "/embeddings":
		return FormatEmbeddings, true
	}
	return 0, false
}
