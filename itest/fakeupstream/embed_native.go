package fakeupstream

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Native embeddings APIs: Gemini embedContent / batchEmbedContents, Ollama /api/embed and
// Bedrock InvokeModel with Titan and Cohere embedding models. Every vector is [Vector] of the
// input text with the requested dimensions (default: the fake's embedding dims), so a test can
// compare what the gateway returns with what the upstream computed. Each request is recorded.

// geminiEmbed serves {model}:embedContent ({"content": {"parts": [{"text"}]},
// "outputDimensionality"?} → {"embedding": {"values"}}) and {model}:batchEmbedContents
// ({"requests": [...]}, each naming "models/{model}" → {"embeddings": [{"values"}]}), as
// https://ai.google.dev/api/embeddings documents them. Google reports no token counts here.
func (s *Server) geminiEmbed(w http.ResponseWriter, model, method string, body []byte) {
	bad := func(msg string) { writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg) }
	if !gjson.ValidBytes(body) {
		bad("Invalid JSON payload received.")
		return
	}
	s.seq.Add(1)
	one := func(req gjson.Result) (map[string]any, bool) {
		if m := req.Get("model"); m.Exists() && m.Str != "models/"+model {
			bad(fmt.Sprintf("Model %q in the request does not match the model in the URL.", m.Str))
			return nil, false
		}
		var texts []string
		req.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
			texts = append(texts, p.Get("text").Str)
			return true
		})
		if len(texts) == 0 {
			bad("* EmbedContentRequest.content: contents is not specified")
			return nil, false
		}
		dims := s.cfg.embedDims
		if d := req.Get("outputDimensionality").Int(); d > 0 {
			dims = int(d)
		}
		return map[string]any{"values": Vector(strings.Join(texts, " "), dims)}, true
	}
	j := gjson.ParseBytes(body)
	if method == "embedContent" {
		e, ok := one(j)
		if ok {
			writeJSON(w, http.StatusOK, map[string]any{"embedding": e})
		}
		return
	}
	reqs := j.Get("requests").Array()
	if len(reqs) == 0 {
		bad("* BatchEmbedContentsRequest.requests: requests is not specified")
		return
	}
	if len(reqs) > 100 {
		bad("* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch")
		return
	}
	out := make([]any, 0, len(reqs))
	for _, req := range reqs {
		e, ok := one(req)
		if !ok {
			return
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"embeddings": out})
}

// ollamaEmbed serves POST /api/embed {"model", "input": string | [string], "dimensions"?} →
// {"model", "embeddings": [[...]], "total_duration", "load_duration", "prompt_eval_count"}
// (https://github.com/ollama/ollama/blob/main/docs/api.md#generate-embeddings).
func (s *Server) ollamaEmbed(w http.ResponseWriter, body []byte) {
	if !gjson.ValidBytes(body) {
		writeOllamaError(w, http.StatusBadRequest, "invalid character in request body")
		return
	}
	j := gjson.ParseBytes(body)
	model := j.Get("model").Str
	if model == "" {
		writeOllamaError(w, http.StatusBadRequest, "model is required")
		return
	}
	var inputs []string
	in := j.Get("input")
	if in.Type == gjson.String {
		inputs = []string{in.Str}
	} else {
		in.ForEach(func(_, v gjson.Result) bool { inputs = append(inputs, v.Str); return true })
	}
	dims := s.cfg.embedDims
	if d := j.Get("dimensions").Int(); d > 0 {
		dims = int(d)
	}
	embs := make([]any, 0, len(inputs))
	total := 0
	for _, t := range inputs {
		embs = append(embs, Vector(t, dims))
		total += tokens(t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"model": model, "embeddings": embs, "total_duration": 1000, "load_duration": 100, "prompt_eval_count": total})
}

// bedrockInvoke serves InvokeModel (POST /model/{modelId}/invoke) for embedding models:
// amazon.titan-embed-text-* ({"inputText", "dimensions"?} → {"embedding",
// "inputTextTokenCount"}) and cohere.embed-* ({"texts", "input_type"} → {"embeddings": [[...]],
// "id", "response_type": "embeddings_floats", "texts"}), with the
// X-Amzn-Bedrock-Input-Token-Count header as AWS sends it.
func (s *Server) bedrockInvoke(w http.ResponseWriter, model string, body []byte) {
	bad := func(msg string) { writeAWSError(w, http.StatusBadRequest, "ValidationException", msg) }
	if !gjson.ValidBytes(body) {
		bad("Malformed input request, please reformat your input and try again.")
		return
	}
	j := gjson.ParseBytes(body)
	n := s.seq.Add(1)
	switch {
	case strings.Contains(model, "amazon.titan-embed-text"):
		text := j.Get("inputText")
		if text.Type != gjson.String || text.Str == "" {
			bad("Malformed input request: #: required key [inputText] not found, please reformat your input and try again.")
			return
		}
		dims := s.cfg.embedDims
		if d := j.Get("dimensions").Int(); d > 0 {
			dims = int(d)
		}
		t := tokens(text.Str)
		w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", strconv.Itoa(t))
		writeJSON(w, http.StatusOK, map[string]any{"embedding": Vector(text.Str, dims), "inputTextTokenCount": t, "embeddingsByType": map[string]any{}})
	case strings.Contains(model, "cohere.embed"):
		texts := j.Get("texts").Array()
		if len(texts) == 0 || len(texts) > 96 || j.Get("input_type").Str == "" {
			bad("Malformed input request: texts (1 to 96) and input_type are required, please reformat your input and try again.")
			return
		}
		embs := make([]any, 0, len(texts))
		strs := make([]string, 0, len(texts))
		total := 0
		for _, t := range texts {
			embs = append(embs, Vector(t.Str, s.cfg.embedDims))
			strs = append(strs, t.Str)
			total += tokens(t.Str)
		}
		w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", strconv.Itoa(total))
		writeJSON(w, http.StatusOK, map[string]any{"embeddings": embs, "id": fmt.Sprintf("fake-embed-%d", n), "response_type": "embeddings_floats", "texts": strs})
	default:
		bad("The provided model identifier is invalid.")
	}
}

// vertexEmbed serves Vertex AI's text embeddings, {model}:predict {"instances": [{"content",
// "task_type"?}], "parameters": {"outputDimensionality"?}} → {"predictions": [{"embeddings":
// {"values", "statistics": {"truncated", "token_count"}}}], "metadata":
// {"billableCharacterCount"}}; gemini-embedding-* models take one instance per request, as on
// Vertex AI.
func (s *Server) vertexEmbed(w http.ResponseWriter, model string, body []byte) {
	bad := func(msg string) { writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg) }
	if !gjson.ValidBytes(body) {
		bad("Invalid JSON payload received.")
		return
	}
	s.seq.Add(1)
	j := gjson.ParseBytes(body)
	instances := j.Get("instances").Array()
	if len(instances) == 0 || (strings.Contains(model, "gemini-embedding") && len(instances) > 1) || len(instances) > 250 {
		bad(fmt.Sprintf("%d instances in one request: %s takes 1 to %d", len(instances), model, map[bool]int{true: 1, false: 250}[strings.Contains(model, "gemini-embedding")]))
		return
	}
	dims := s.cfg.embedDims
	if d := j.Get("parameters.outputDimensionality").Int(); d > 0 {
		dims = int(d)
	}
	preds := make([]any, 0, len(instances))
	chars := 0
	for _, in := range instances {
		text := in.Get("content").Str
		if text == "" {
			bad("content is required in every instance")
			return
		}
		chars += len(text)
		preds = append(preds, map[string]any{"embeddings": map[string]any{"values": Vector(text, dims),
			"statistics": map[string]any{"truncated": false, "token_count": tokens(text)}}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"predictions": preds, "metadata": map[string]any{"billableCharacterCount": chars}})
}
