package provider

import (
	"lockstep/pkg/format"

	"context"
	"errors"

	"github.com/tidwall/gjson"

	"lockstep/pkg/telemetry"
)

// startAttempt starts the span of one upstream attempt of d (telemetry.StartUpstream): its
// provider, upstream model and API base. Off: ctx and nil.
func startAttempt(ctx context.Context, d *Deployment) (context.Context, *telemetry.Span) {
	if !telemetry.Enabled() {
		return ctx, nil
	}
	return telemetry.StartUpstream(ctx, d.Provider, d.Model, d.APIBase)
}

// endAttempt ends an attempt's span: the upstream status, the answer's model
// (gen_ai.response.model) and token usage, or the error.
func endAttempt(sp *telemetry.Span, res *Response, err error) {
	if sp == nil {
		return
	}
	var ue *format.UpstreamError
	var re *format.RequestError
	if errors.As(err, &ue) {
		sp.Int("http.response.status_code", int64(ue.Status))
	} else if errors.As(err, &re) {
		sp.Int("http.response.status_code", int64(re.Status()))
	}
	if res != nil {
		sp.Int("http.response.status_code", int64(max(res.Status, 200)))
		if m := gjson.GetBytes(res.Body, "model"); m.Type == gjson.String {
			sp.Str("gen_ai.response.model", m.String())
		}
		sp.Int("gen_ai.usage.input_tokens", int64(res.Usage.PromptTokens))
		sp.Int("gen_ai.usage.output_tokens", int64(res.Usage.CompletionTokens))
	}
	sp.EndErr(err)
}
