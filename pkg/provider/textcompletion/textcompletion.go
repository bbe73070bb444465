// Package textcompletion is the provider.Vendor of LiteLLM's text-completion-openai provider:
// OpenAI's legacy completions API (POST {api_base}/completions, https://platform.openai.com/docs/api-reference/completions)
// for instruct models (gpt-3.5-turbo-instruct, babbage-002, davinci-002), registered by
// cmd/gateway: provider.NewBuilder(policy, textcompletion.Vendor, …). Every inbound format
// (chat, responses, messages, completions) is translated to a prompt and back.
package textcompletion

import (
	"encoding/json"
	"io"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// Vendor serves the text-completion-openai/<model> prefix: api_base defaults to
// https://api.openai.com/v1 (env OPENAI_BASE_URL), api_key to OPENAI_API_KEY, sent as a bearer
// token (LiteLLM's litellm/llms/openai/completion).
var Vendor = provider.Vendor{Names: []string{"text-completion-openai"}, APIBase: "https://api.openai.com/v1",
	KeyEnv: "OPENAI_API_KEY", BaseEnv: "OPENAI_BASE_URL", Setup: setup}

func setup(s *provider.Setup) error {
	d := s.Deployment()
	u := strings.TrimRight(d.APIBase, "/") + "/completions"
	s.SetWire(completionsAPI{}, u, u)
	if d.APIKey != "" {
		s.SetHeader("Authorization", "Bearer "+d.APIKey) // extra_headers still win
	}
	return nil
}

// completionsAPI is the legacy completions wire: the request's texts become one prompt, the
// answer's first choice the assistant's text.
type completionsAPI struct{}

var _ provider.Wire = completionsAPI{}

// prompt is the request's text as one prompt: the system texts, then each message's text
// parts, joined by "\n\n"; one user message alone is its text unchanged (LiteLLM's
// _transform_prompt base case; for several messages LiteLLM sends one prompt per message and
// answers one choice each, where lockstep sends them as one prompt and answers one choice).
// Tool calls and results are not text a completion model reads: refused with 400, as images.
func prompt(d *provider.Deployment, r *format.Request) (string, error) {
	var parts []string
	parts = append(parts, r.System()...)
	for _, m := range r.Messages() {
		var b strings.Builder
		for _, p := range m.Parts() {
			switch p.Kind() {
			case format.PartText:
				b.WriteString(p.Text())
			default:
				return "", format.BadRequest("messages: only text can be sent to provider %s (a completions model takes a prompt)", d.Provider)
			}
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "\n\n"), nil
}

func (completionsAPI) Request(d *provider.Deployment, r *format.Request) ([]byte, error) {
	if len(r.Tools()) > 0 {
		return nil, format.BadRequest("tools: not supported by provider %s (a completions model takes a prompt)", d.Provider)
	}
	text, err := prompt(d, r)
	if err != nil {
		return nil, err
	}
	body := struct {
		Model         string          `json:"model"`
		Prompt        string          `json:"prompt"`
		Stream        bool            `json:"stream,omitempty"`
		StreamOptions map[string]bool `json:"stream_options,omitempty"`
		MaxTokens     int64           `json:"max_tokens,omitempty"`
		Temperature   json.Number     `json:"temperature,omitempty"`
		TopP          json.Number     `json:"top_p,omitempty"`
		Stop          []string        `json:"stop,omitempty"`
	}{Model: d.Model, Prompt: text, Stream: r.Stream(), MaxTokens: r.MaxTokens(),
		Temperature: json.Number(r.Temperature()), TopP: json.Number(r.TopP()), Stop: r.StopSequences()}
	if r.Stream() {
		body.StreamOptions = map[string]bool{"include_usage": true} // every call is charged
	}
	return format.Marshal(body), nil
}

func stopOf(reason string) format.Stop {
	switch reason {
	case "length":
		return format.StopLength
	case "content_filter":
		return format.StopFilter
	}
	return format.StopEnd
}

func usageOf(j gjson.Result) format.Tokens {
	u := j.Get("usage")
	return format.Tokens{In: u.Get("prompt_tokens").Int(), Out: u.Get("completion_tokens").Int()}
}

func (completionsAPI) Result(raw []byte) (*format.Result, error) {
	if !format.ValidJSON(raw) {
		return nil, format.ErrBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	id := j.Get("id").Str
	if id == "" {
		id = format.NewID("chatcmpl-")
	}
	r := format.NewResult(id, j.Get("model").Str)
	c := j.Get("choices.0")
	if t := c.Get("text").Str; t != "" {
		r.AddText(t)
	}
	r.SetStop(stopOf(c.Get("finish_reason").Str))
	r.SetUsage(usageOf(j))
	return r, nil
}

func (completionsAPI) Frames(body io.Reader) provider.FrameReader { return provider.NewSSEReader(body) }

func (completionsAPI) Decoder(r format.Renderer, model string) format.Decoder {
	return &decoder{r: r, model: model}
}

// decoder reads the completions stream: data frames with choices[0].text deltas, the
// finish_reason on the last choice frame, usage on that frame or on a final frame without
// choices (stream_options.include_usage), then "data: [DONE]".
type decoder struct {
	r       format.Renderer
	model   string
	started bool
	stop    format.Stop
	tokens  format.Tokens
}

func (d *decoder) Frame(b []byte, _, data []byte) ([]byte, string, bool) {
	if string(data) == "[DONE]" {
		return d.finish(b), "", true
	}
	j := gjson.Parse(unsafe.String(unsafe.SliceData(data), len(data)))
	if e := j.Get("error"); e.Exists() {
		return d.r.Fail(b, 500, strings.Clone(e.Get("message").String())), "", true
	}
	if !d.started {
		d.started = true
		m := strings.Clone(j.Get("model").Str)
		if m == "" {
			m = d.model
		}
		id := strings.Clone(j.Get("id").Str)
		if id == "" {
			id = format.NewID("chatcmpl-")
		}
		b = d.r.Start(b, id, m, format.Tokens{})
	}
	if j.Get("usage.prompt_tokens").Exists() {
		d.tokens = usageOf(j)
	}
	var text string
	c := j.Get("choices.0")
	if t := c.Get("text").Str; t != "" {
		text = strings.Clone(t)
		b = d.r.Text(b, text)
	}
	if f := c.Get("finish_reason"); f.Type == gjson.String {
		d.stop = stopOf(f.Str)
	}
	return b, text, false
}

func (d *decoder) finish(b []byte) []byte {
	if !d.started {
		d.started = true
		b = d.r.Start(b, format.NewID("chatcmpl-"), d.model, format.Tokens{})
	}
	return d.r.Finish(b, d.stop, "", d.tokens)
}

func (d *decoder) EOF(b []byte) ([]byte, error) { return b, format.ErrTruncated }
