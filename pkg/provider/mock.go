package provider

import (
	"lockstep/pkg/format"

	"hash/fnv"
	"strconv"

	"github.com/tidwall/gjson"
)

// LiteLLM's mock answers report this usage (litellm/main.py mock_completion: prompt_tokens=10,
// completion_tokens=20, total_tokens=30).
var mockUsage = format.Tokens{In: 10, Out: 20}

// mockStreamChunks is how many text deltas a streamed mock answer is split into, at most.
const mockStreamChunks = 4

// mockEmbeddingDims is the length of mock embedding vectors unless the request asks for
// "dimensions".
const mockEmbeddingDims = 8

// mockErrors are LiteLLM's mock_response values that raise instead of answering
// (litellm/main.py mock_completion, litellm/exceptions.py).
var mockErrors = map[string]int{
	"litellm.RateLimitError":             429,
	"litellm.InternalServerError":        500,
	"litellm.ServiceUnavailableError":    503,
	"litellm.Timeout":                    504,
	"litellm.BadRequestError":            400,
	"litellm.ContextWindowExceededError": 400,
}

func mockError(d *Deployment) error {
	status, ok := mockErrors[*d.MockResponse]
	if !ok {
		return nil
	}
	return &format.UpstreamError{Status: status, Message: *d.MockResponse + ": mock_response error for model " + d.ModelName, Retryable: retryableStatus(status)}
}

func mockResult(d *Deployment, in format.Format) *format.Result {
	prefix := "chatcmpl-"
	switch in {
	case format.FormatCompletions:
		prefix = "cmpl-"
	case format.FormatMessages:
		prefix = "msg_"
	case format.FormatResponses:
		prefix = ""
	}
	res := format.NewResult(format.NewID(prefix), d.Model)
	res.SetUsage(mockUsage)
	if *d.MockResponse != "" {
		res.AddText(*d.MockResponse)
	}
	return res
}

// mockDo answers locally in format in: the mock_response text as the assistant answer, or
// deterministic vectors for embeddings.
func mockDo(d *Deployment, in format.Format, body []byte) (*Response, error) {
	if err := mockError(d); err != nil {
		return nil, err
	}
	if _, err := format.ParseJSONObject(body); err != nil {
		return nil, err
	}
	if in == format.FormatEmbeddings {
		return mockEmbeddings(d, body)
	}
	res := mockResult(d, in)
	return &Response{Status: 200, Body: format.RenderResult(in, res), text: res.Text(), Usage: res.Usage()}, nil
}

// mockStream streams the mock answer in format in, its text split into a few deltas.
func mockStream(d *Deployment, in format.Format, body []byte) (Stream, error) {
	if err := mockError(d); err != nil {
		return nil, err
	}
	if _, err := format.ParseJSONObject(body); err != nil {
		return nil, err
	}
	res := mockResult(d, in)
	return &sliceStream{events: replayEvents(in, res, includeUsage(body), mockStreamChunks), usage: res.Usage()}, nil
}

// mockEmbeddings returns an OpenAI embedding list with one deterministic vector per input
// (string, array of strings, token array or array of token arrays).
func mockEmbeddings(d *Deployment, body []byte) (*Response, error) {
	input := gjson.GetBytes(body, "input")
	var inputs []string
	switch {
	case input.Type == gjson.String:
		inputs = []string{input.Str}
	case input.IsArray():
		arr := input.Array()
		if len(arr) > 0 && arr[0].Type == gjson.Number { // one token array
			inputs = []string{input.Raw}
		} else {
			for _, v := range arr {
				if v.Type == gjson.String {
					inputs = append(inputs, v.Str)
				} else {
					inputs = append(inputs, v.Raw)
				}
			}
		}
	}
	if len(inputs) == 0 {
		return nil, format.BadRequest("input: must be a non-empty string or array")
	}
	dims := mockEmbeddingDims
	if v := gjson.GetBytes(body, "dimensions"); v.Type == gjson.Number && v.Int() > 0 && v.Int() <= 8192 {
		dims = int(v.Int())
	}
	b := append(make([]byte, 0, 64+len(inputs)*dims*12), `{"object":"list","data":[`...)
	for i, s := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":[`...)
		for j, f := range mockVector(s, dims) {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"model":`...)
	b = format.AppendJSONString(b, d.Model)
	b = append(b, `,"usage":{"prompt_tokens":10,"total_tokens":10}}`...)
	return &Response{Status: 200, Body: b, Usage: format.Usage{PromptTokens: 10}}, nil
}

// mockVector derives dims floats in [-1, 1) from an FNV-1a hash of s (xorshift64*).
func mockVector(s string, dims int) []float32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	x := h.Sum64()
	out := make([]float32, dims)
	for i := range out {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		out[i] = float32(float64((x*2685821657736338717)>>11)/float64(1<<53)*2 - 1)
	}
	return out
}
