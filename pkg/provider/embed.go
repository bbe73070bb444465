package provider

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Native embeddings: /v1/embeddings on a provider whose embeddings API is not OpenAI's
// (Gemini embedContent/batchEmbedContents, Ollama /api/embed, Bedrock InvokeModel with Titan
// or Cohere embedding models). The OpenAI request is read into an embedRequest, sent as one
// or more upstream calls, and the vectors come back as an OpenAI embedding list, in input
// order, with usage.prompt_tokens where the provider reports a count (0 where it does not).

// nativeEmbedder is a provider's embeddings API.
type nativeEmbedder interface {
	// calls turns the request into upstream calls, each covering the next n inputs in order.
	calls(d *Deployment, r *embedRequest) ([]embedCall, error)
	// parse reads one call's answer: one raw JSON array of numbers per input it covered, and
	// the prompt tokens the provider reported (0 when none).
	parse(raw []byte, h http.Header) (vectors []string, tokens int64, err error)
}

// embedRequest is an OpenAI embeddings request.
type embedRequest struct {
	inputs     []string
	dimensions int64  // 0: the model's default
	base64     bool   // encoding_format "base64"
	taskType   string // task_type (Gemini), input_type (Cohere); "" when absent
}

// embedCall is one upstream call.
type embedCall struct {
	url  string
	body []byte
	n    int // inputs covered
}

// parseEmbedRequest reads an OpenAI embeddings body. Token-id inputs have no text to send to
// a native API: 400 naming the provider.
func parseEmbedRequest(d *Deployment, body []byte) (*embedRequest, error) {
	root, err := parseJSONObject(body)
	if err != nil {
		return nil, err
	}
	r := &embedRequest{dimensions: root.Get("dimensions").Int(), base64: root.Get("encoding_format").Str == "base64"}
	r.taskType = root.Get("task_type").Str
	if r.taskType == "" {
		r.taskType = root.Get("input_type").Str
	}
	input := root.Get("input")
	switch {
	case input.Type == gjson.String:
		r.inputs = []string{input.Str}
	case input.IsArray():
		for _, v := range input.Array() {
			if v.Type != gjson.String {
				return nil, badRequest("input: token arrays are not supported by provider %s; send strings", d.Provider)
			}
			r.inputs = append(r.inputs, v.Str)
		}
	default:
		return nil, badRequest("input: a string or an array of strings is required")
	}
	if len(r.inputs) == 0 {
		return nil, badRequest("input: an empty array has nothing to embed")
	}
	return r, nil
}

// embed serves /v1/embeddings on a native embeddings API (Client.do).
func (c *Client) embed(ctx context.Context, d *Deployment, body []byte) (*Response, error) {
	r, err := parseEmbedRequest(d, body)
	if err != nil {
		return nil, err
	}
	calls, err := d.embedder.calls(d, r)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	vectors := make([]string, 0, len(r.inputs))
	var tokens int64
	for _, call := range calls {
		resp, err := c.sendTo(cctx, d, call.url, nil, formatNative, call.body, nil)
		if err != nil {
			return nil, transportError(ctx, err, d.Timeout, "call")
		}
		raw, err := readAll(resp)
		resp.Body.Close()
		if err != nil {
			return nil, transportError(ctx, err, d.Timeout, "call")
		}
		vs, n, err := d.embedder.parse(raw, resp.Header)
		if err == nil && len(vs) != call.n {
			err = fmt.Errorf("%d embeddings for %d inputs", len(vs), call.n)
		}
		if err != nil {
			return nil, &UpstreamError{Status: 502, Message: "invalid upstream answer: " + err.Error(), Body: raw, Retryable: true}
		}
		vectors = append(vectors, vs...)
		tokens += n
	}
	out := renderEmbeddings(vectors, d.Model, tokens, r.base64)
	return &Response{Status: http.StatusOK, Body: out, Usage: Usage{PromptTokens: tokens}}, nil
}

// renderEmbeddings writes an OpenAI embedding list: the vectors as the upstream wrote them
// (raw JSON arrays), or as base64 of little-endian float32s (encoding_format "base64").
func renderEmbeddings(vectors []string, model string, tokens int64, b64 bool) []byte {
	size := 96 + len(model)
	for _, v := range vectors {
		size += len(v) + 48
	}
	b := make([]byte, 0, size)
	b = append(b, `{"object":"list","data":[`...)
	for i, v := range vectors {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if b64 {
			nums := gjson.Parse(v).Array()
			buf := make([]byte, 4*len(nums))
			for j, f := range nums {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(float32(f.Float())))
			}
			b = appendJSONString(b, base64.StdEncoding.EncodeToString(buf))
		} else {
			b = append(b, v...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, tokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, tokens, 10)
	return append(b, "}}"...)
}

// vectorOf returns the raw JSON array of numbers v, or an error naming what is wrong.
func vectorOf(v gjson.Result, what string) (string, error) {
	if !v.IsArray() {
		return "", fmt.Errorf("%s is not an array of numbers", what)
	}
	return v.Raw, nil
}

// ---- Gemini (https://ai.google.dev/api/embeddings) ----

// geminiEmbed is Google AI Studio's embeddings API: one input → POST
// {prefix}:embedContent {"content": {"parts": [{"text"}]}} answering {"embedding":
// {"values"}}; several → POST {prefix}:batchEmbedContents {"requests": [...]} (at most 100
// each) answering {"embeddings": [{"values"}]}. dimensions → outputDimensionality, task_type
// → taskType. Google reports no token count for embeddings (usageMetadata.promptTokenCount is
// read when present).
type geminiEmbed struct {
	prefix string // {api_base}/v1beta/models/{model}
	model  string // "models/{model}"
}

const geminiEmbedBatch = 100

func (g geminiEmbed) request(b []byte, r *embedRequest, text string) []byte {
	b = append(b, `{"model":`...)
	b = appendJSONString(b, g.model)
	b = append(b, `,"content":{"parts":[{"text":`...)
	b = appendJSONString(b, text)
	b = append(b, "}]}"...)
	if r.dimensions > 0 {
		b = append(b, `,"outputDimensionality":`...)
		b = strconv.AppendInt(b, r.dimensions, 10)
	}
	if r.taskType != "" {
		b = append(b, `,"taskType":`...)
		b = appendJSONString(b, r.taskType)
	}
	return append(b, '}')
}

func (g geminiEmbed) calls(_ *Deployment, r *embedRequest) ([]embedCall, error) {
	if len(r.inputs) == 1 {
		return []embedCall{{url: g.prefix + ":embedContent", body: g.request(nil, r, r.inputs[0]), n: 1}}, nil
	}
	var calls []embedCall
	for start := 0; start < len(r.inputs); start += geminiEmbedBatch {
		batch := r.inputs[start:min(start+geminiEmbedBatch, len(r.inputs))]
		b := []byte(`{"requests":[`)
		for i, t := range batch {
			if i > 0 {
				b = append(b, ',')
			}
			b = g.request(b, r, t)
		}
		calls = append(calls, embedCall{url: g.prefix + ":batchEmbedContents", body: append(b, "]}"...), n: len(batch)})
	}
	return calls, nil
}

func (geminiEmbed) parse(raw []byte, _ http.Header) ([]string, int64, error) {
	j := gjson.ParseBytes(raw)
	tokens := j.Get("usageMetadata.promptTokenCount").Int()
	if e := j.Get("embedding"); e.Exists() {
		v, err := vectorOf(e.Get("values"), "embedding.values")
		return []string{v}, tokens, err
	}
	var out []string
	var err error
	j.Get("embeddings").ForEach(func(_, e gjson.Result) bool {
		var v string
		v, err = vectorOf(e.Get("values"), "embeddings[].values")
		out = append(out, v)
		return err == nil
	})
	return out, tokens, err
}

// ---- Vertex AI (https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/text-embeddings-api) ----

// vertexEmbed is Vertex AI's text embeddings API: POST {prefix}:predict {"instances":
// [{"content", "task_type"?}], "parameters": {"outputDimensionality"?}} answering
// {"predictions": [{"embeddings": {"values", "statistics": {"token_count"}}}]}; usage is the
// sum of token_count. gemini-embedding-* models take one instance per request, the others up
// to 250.
type vertexEmbed struct {
	url   string
	batch int
}

func newVertexEmbed(prefix, model string) vertexEmbed {
	if strings.Contains(model, "gemini-embedding") {
		return vertexEmbed{url: prefix + ":predict", batch: 1}
	}
	return vertexEmbed{url: prefix + ":predict", batch: 250}
}

func (v vertexEmbed) calls(_ *Deployment, r *embedRequest) ([]embedCall, error) {
	var calls []embedCall
	for start := 0; start < len(r.inputs); start += v.batch {
		batch := r.inputs[start:min(start+v.batch, len(r.inputs))]
		b := []byte(`{"instances":[`)
		for i, t := range batch {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"content":`...)
			b = appendJSONString(b, t)
			if r.taskType != "" {
				b = append(b, `,"task_type":`...)
				b = appendJSONString(b, r.taskType)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
		if r.dimensions > 0 {
			b = append(b, `,"parameters":{"outputDimensionality":`...)
			b = strconv.AppendInt(b, r.dimensions, 10)
			b = append(b, '}')
		}
		calls = append(calls, embedCall{url: v.url, body: append(b, '}'), n: len(batch)})
	}
	return calls, nil
}

func (vertexEmbed) parse(raw []byte, _ http.Header) ([]string, int64, error) {
	var out []string
	var tokens int64
	var err error
	gjson.ParseBytes(raw).Get("predictions").ForEach(func(_, p gjson.Result) bool {
		var v string
		v, err = vectorOf(p.Get("embeddings.values"), "predictions[].embeddings.values")
		out = append(out, v)
		tokens += p.Get("embeddings.statistics.token_count").Int()
		return err == nil
	})
	return out, tokens, err
}

// ---- Ollama (https://github.com/ollama/ollama/blob/main/docs/api.md#generate-embeddings) ----

// ollamaEmbed is Ollama's POST /api/embed {"model", "input": [...], "dimensions"?} answering
// {"embeddings": [[...]], "prompt_eval_count"} (the prompt tokens).
type ollamaEmbed struct{ url string }

func (o ollamaEmbed) calls(d *Deployment, r *embedRequest) ([]embedCall, error) {
	b := []byte(`{"model":`)
	b = appendJSONString(b, d.Model)
	b = append(b, `,"input":`...)
	b = appendStrings(b, r.inputs)
	if r.dimensions > 0 {
		b = append(b, `,"dimensions":`...)
		b = strconv.AppendInt(b, r.dimensions, 10)
	}
	return []embedCall{{url: o.url, body: append(b, '}'), n: len(r.inputs)}}, nil
}

func (ollamaEmbed) parse(raw []byte, _ http.Header) ([]string, int64, error) {
	j := gjson.ParseBytes(raw)
	var out []string
	var err error
	j.Get("embeddings").ForEach(func(_, e gjson.Result) bool {
		var v string
		v, err = vectorOf(e, "embeddings[]")
		out = append(out, v)
		return err == nil
	})
	return out, j.Get("prompt_eval_count").Int(), err
}

// ---- Bedrock InvokeModel (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-embed.html) ----

// bedrockEmbed is InvokeModel (POST /model/{modelId}/invoke, SigV4-signed like Converse) with
// an embedding model: Amazon Titan Text Embeddings ({"inputText", "dimensions"?}, one input
// per call, answering {"embedding", "inputTextTokenCount"}) or Cohere Embed ({"texts",
// "input_type"}, up to 96 inputs per call, answering {"embeddings": [[...]]} or
// {"embeddings": {"float": [[...]]}}; the token count from the
// X-Amzn-Bedrock-Input-Token-Count header).
type bedrockEmbed struct {
	url    string
	cohere bool
}

const cohereEmbedBatch = 96

// bedrockEmbedder returns the embeddings API of a Bedrock model id, nil when it is not an
// embedding model (an optional cross-region prefix such as "us." is allowed).
func bedrockEmbedder(modelID, invokeURL string) nativeEmbedder {
	switch {
	case strings.Contains(modelID, "amazon.titan-embed-text"):
		return bedrockEmbed{url: invokeURL}
	case strings.Contains(modelID, "cohere.embed"):
		return bedrockEmbed{url: invokeURL, cohere: true}
	}
	return nil
}

func (e bedrockEmbed) calls(_ *Deployment, r *embedRequest) ([]embedCall, error) {
	var calls []embedCall
	if e.cohere {
		inputType := r.taskType
		if inputType == "" {
			inputType = "search_document"
		}
		for start := 0; start < len(r.inputs); start += cohereEmbedBatch {
			batch := r.inputs[start:min(start+cohereEmbedBatch, len(r.inputs))]
			b := []byte(`{"texts":`)
			b = appendStrings(b, batch)
			b = append(b, `,"input_type":`...)
			b = appendJSONString(b, inputType)
			calls = append(calls, embedCall{url: e.url, body: append(b, '}'), n: len(batch)})
		}
		return calls, nil
	}
	for _, t := range r.inputs {
		b := []byte(`{"inputText":`)
		b = appendJSONString(b, t)
		if r.dimensions > 0 {
			b = append(b, `,"dimensions":`...)
			b = strconv.AppendInt(b, r.dimensions, 10)
		}
		calls = append(calls, embedCall{url: e.url, body: append(b, '}'), n: 1})
	}
	return calls, nil
}

func (e bedrockEmbed) parse(raw []byte, h http.Header) ([]string, int64, error) {
	j := gjson.ParseBytes(raw)
	tokens, _ := strconv.ParseInt(h.Get("X-Amzn-Bedrock-Input-Token-Count"), 10, 64)
	if !e.cohere {
		if n := j.Get("inputTextTokenCount"); n.Exists() {
			tokens = n.Int()
		}
		v, err := vectorOf(j.Get("embedding"), "embedding")
		return []string{v}, tokens, err
	}
	embs := j.Get("embeddings")
	if embs.IsObject() {
		embs = embs.Get("float")
	}
	var out []string
	var err error
	embs.ForEach(func(_, e gjson.Result) bool {
		var v string
		v, err = vectorOf(e, "embeddings[]")
		out = append(out, v)
		return err == nil
	})
	return out, tokens, err
}
