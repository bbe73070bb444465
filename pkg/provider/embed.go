package provider

import (
	"lockstep/pkg/format"

	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
)

// Native embeddings: /v1/embeddings on a provider whose embeddings API is not OpenAI's
// (Gemini embedContent/batchEmbedContents, Ollama /api/embed, Bedrock InvokeModel with Titan
// or Cohere embedding models). The OpenAI request is read into an embedRequest, sent as one
// or more upstream calls, and the vectors come back as an OpenAI embedding list, in input
// order, with usage.prompt_tokens where the provider reports a count (0 where it does not).

// embedRequest is an OpenAI embeddings request.
type embedRequest struct {
	inputs     []string
	dimensions int64  // 0: the model's default
	base64     bool   // encoding_format "base64"
	taskType   string // task_type (Gemini), input_type (Cohere); "" when absent
}

// parseEmbedRequest reads an OpenAI embeddings body. Token-id inputs have no text to send to
// a native API: 400 naming the provider.
func parseEmbedRequest(d *Deployment, body []byte) (*embedRequest, error) {
	root, err := format.ParseJSONObject(body)
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
				return nil, format.BadRequest("input: token arrays are not supported by provider %s; send strings", d.Provider)
			}
			r.inputs = append(r.inputs, v.Str)
		}
	default:
		return nil, format.BadRequest("input: a string or an array of strings is required")
	}
	if len(r.inputs) == 0 {
		return nil, format.BadRequest("input: an empty array has nothing to embed")
	}
	return r, nil
}

// embed serves /v1/embeddings on a native embeddings API (Client.do).
func (c *Client) embed(ctx context.Context, d *Deployment, body []byte) (*Response, error) {
	r, err := parseEmbedRequest(d, body)
	if err != nil {
		return nil, err
	}
	calls, err := d.embedder.Calls(d, r)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	vectors := make([]string, 0, len(r.inputs))
	var tokens int64
	for _, call := range calls {
		resp, err := c.sendTo(cctx, d, call.URL, nil, format.FormatNative, call.Body, nil)
		if err != nil {
			return nil, transportError(ctx, err, d.Timeout, "call")
		}
		raw, err := readAll(resp)
		resp.Body.Close()
		if err != nil {
			return nil, transportError(ctx, err, d.Timeout, "call")
		}
		vs, n, err := d.embedder.Parse(raw, resp.Header)
		if err == nil && len(vs) != call.N {
			err = fmt.Errorf("%d embeddings for %d inputs", len(vs), call.N)
		}
		if err != nil {
			return nil, &format.UpstreamError{Status: 502, Message: "invalid upstream answer: " + err.Error(), Body: raw, Retryable: true}
		}
		vectors = append(vectors, vs...)
		tokens += n
	}
	out := renderEmbeddings(vectors, d.Model, tokens, r.base64)
	return &Response{Status: http.StatusOK, Body: out, Usage: format.Usage{PromptTokens: tokens}}, nil
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
			b = format.AppendJSONString(b, base64.StdEncoding.EncodeToString(buf))
		} else {
			b = append(b, v...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = format.AppendJSONString(b, model)
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
