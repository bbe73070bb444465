// Package provider calls upstream LLM APIs on behalf of the gateway; the translation between
// the wire formats clients speak and the ones upstreams serve is pkg/format's, called from here.
//
// Four translatable inbound formats exist (see [format.Format]): OpenAI Chat Completions, OpenAI
// Responses, Anthropic Messages and OpenAI Embeddings; completions, images, moderations and audio
// are passed through to OpenAI-compatible upstreams only. Upstreams speak the OpenAI API (openai,
// azure and the OpenAI-compatible providers), the Anthropic Messages API (anthropic, Claude on
// vertex_ai), or a native API translated here: Gemini generateContent (gemini, vertex_ai),
// Bedrock Converse (bedrock), Ollama /api/chat (ollama). When the inbound format is one
// the upstream serves natively, the request is passed through: only the "model" value is
// replaced, by a byte edit, and answers (streamed SSE frames included) are forwarded verbatim.
// Otherwise the request is translated into the upstream's format and the answer back, streams
// event by event (pkg/format), following LiteLLM's translations (litellm/llms/anthropic/chat/transformation.py
// and litellm/llms/anthropic/experimental_pass_through/, litellm/responses/litellm_completion_transformation/).
//
// Deployments come from a model row's litellm_params (see [NewDeployment]); a deployment with a
// mock_response answers locally in the inbound format without any network call.
package provider
