package call

import (
	"lockstep/pkg/format"
	"lockstep/pkg/router"
	"lockstep/pkg/spend"
	"lockstep/pkg/telemetry"
)

// endSpan ends the call's span (telemetry.StartCall in Start; once) with the GenAI outcome:
// the deployment's provider and upstream model, the tokens, the cost the spend log records
// (spend.Cost over model_info). Every hook is a nil check when tracing is off.
func (c *Call) endSpan(d *router.Deployment, u format.Usage, err error) {
	if c.span == nil {
		return
	}
	r := telemetry.CallResult{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, Err: err}
	if d != nil && d.Deployment != nil {
		r.Provider, r.ResponseModel, r.ModelID = d.Provider, d.Model, d.ModelID
		r.Cost = spend.Cost(d.ModelInfo, u.PromptTokens, u.CompletionTokens)
	}
	c.span.EndCall(r)
	c.span = nil
}
