package bedrock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// SageMaker (LiteLLM's sagemaker provider, litellm/llms/sagemaker/completion): a SageMaker
// endpoint serving a Hugging Face text-generation container, called with InvokeEndpoint
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html):
// POST https://runtime.sagemaker.{region}.amazonaws.com/endpoints/{endpoint}/invocations, SigV4
// service "sagemaker", body {"inputs": <prompt>, "parameters": {max_new_tokens, temperature,
// top_p, stop}}, answered [{"generated_text": "..."}].
type sagemakerAPI struct{}

var _ provider.Wire = sagemakerAPI{}

// SageMakerVendor serves the sagemaker/<endpoint-name> prefix. litellm_params as bedrock's
// (awsSigner: aws_region_name, keys or the default chain, the region resolved at call time when
// none is set); api_base (LiteLLM's sagemaker_base_url is the same) replaces the endpoint URL
// base. A streamed call is answered as a stream of the one answer (InvokeEndpoint; LiteLLM's
// fake stream); embeddings are not served.
var SageMakerVendor = provider.Vendor{Names: []string{"sagemaker"}, DerivedBase: true, Setup: setupSageMaker}

func setupSageMaker(s *provider.Setup) error {
	d := s.Deployment()
	bs, region, profile, err := awsSigner(s, "sagemaker")
	if err != nil {
		return err
	}
	bs.service = "sagemaker"
	base, err := s.ParamOrEnv("sagemaker_base_url", "")
	if err != nil {
		return err
	}
	if region == "" && d.MockResponse != nil {
		return nil
	}
	if base, err = awsBase(s, bs, region, profile, base, "runtime.sagemaker"); err != nil {
		return err
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("litellm_params.api_base: %q is not an http(s) URL", base)
	}
	s.SetAPIBase(strings.TrimRight(base, "/"))
	u := d.APIBase + "/endpoints/" + url.PathEscape(d.Model) + "/invocations"
	s.SetWire(sagemakerAPI{}, u, u)
	s.SetHeader("Accept", "application/json")
	s.SetSigner(bs)
	return nil
}

func (sagemakerAPI) Request(d *provider.Deployment, r *format.Request) ([]byte, error) {
	if len(r.Tools()) > 0 {
		return nil, format.BadRequest("tools: not supported by provider %s (a text-generation endpoint takes a prompt)", d.Provider)
	}
	var parts []string
	parts = append(parts, r.System()...)
	for _, m := range r.Messages() {
		var b strings.Builder
		for _, p := range m.Parts() {
			if p.Kind() != format.PartText {
				return nil, format.BadRequest("messages: only text can be sent to provider %s (a text-generation endpoint takes a prompt)", d.Provider)
			}
			b.WriteString(p.Text())
		}
		parts = append(parts, b.String())
	}
	params := map[string]any{}
	if r.MaxTokens() > 0 {
		params["max_new_tokens"] = r.MaxTokens()
	}
	for k, v := range map[string]string{"temperature": r.Temperature(), "top_p": r.TopP(), "top_k": r.TopK()} {
		if v != "" {
			params[k] = json.Number(v)
		}
	}
	if len(r.StopSequences()) > 0 {
		params["stop"] = r.StopSequences()
	}
	return format.Marshal(map[string]any{"inputs": strings.Join(parts, "\n\n"), "parameters": params}), nil
}

// generated is the answer's text and its token counts: TGI's details.generated_tokens when
// present, else ⌈bytes/4⌉ (the container reports no usage; LiteLLM counts with a tokenizer).
func generated(raw []byte) (string, format.Tokens, error) {
	if !format.ValidJSON(raw) {
		return "", format.Tokens{}, format.ErrBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	if j.IsArray() {
		j = j.Get("0")
	}
	text := j.Get("generated_text").Str
	out := j.Get("details.generated_tokens").Int()
	if out == 0 && text != "" {
		out = int64(len(text)+3) / 4
	}
	return text, format.Tokens{Out: out}, nil
}

func (sagemakerAPI) Result(raw []byte) (*format.Result, error) {
	text, t, err := generated(raw)
	if err != nil {
		return nil, err
	}
	r := format.NewResult(format.NewID("chatcmpl-"), "")
	if text != "" {
		r.AddText(text)
	}
	r.SetUsage(t)
	return r, nil
}

func (sagemakerAPI) Frames(body io.Reader) provider.FrameReader { return &wholeBody{r: body} }

func (sagemakerAPI) Decoder(r format.Renderer, model string) format.Decoder {
	return &sagemakerDecoder{r: r, model: model}
}

// wholeBody is the answer as one frame.
type wholeBody struct {
	r    io.Reader
	data []byte
	done bool
}

func (w *wholeBody) Next() error {
	if w.done {
		return io.EOF
	}
	w.done = true
	var err error
	if w.data, err = io.ReadAll(io.LimitReader(w.r, 64<<20)); err != nil {
		return err
	}
	if len(bytes.TrimSpace(w.data)) == 0 {
		return io.EOF
	}
	return nil
}

func (w *wholeBody) Current() (raw, event, data []byte) { return w.data, nil, w.data }

// sagemakerDecoder renders the one answer as a stream: start, its text, finish.
type sagemakerDecoder struct {
	r     format.Renderer
	model string
}

func (d *sagemakerDecoder) Frame(b []byte, _, data []byte) ([]byte, string, bool) {
	text, t, err := generated(data)
	if err != nil {
		return d.r.Fail(b, 502, "invalid upstream answer: "+err.Error()), "", true
	}
	b = d.r.Start(b, format.NewID("chatcmpl-"), d.model, format.Tokens{})
	if text != "" {
		b = d.r.Text(b, text)
	}
	return d.r.Finish(b, format.StopEnd, "", t), text, true
}

func (d *sagemakerDecoder) EOF(b []byte) ([]byte, error) { return b, format.ErrTruncated }
