package router

import (
	"fmt"
	"math"

	"github.com/tidwall/gjson"
)

// Params are a deployment's routing parameters, from its litellm_params as LiteLLM reads
// them (types/router.py GenericLiteLLMParams): rpm and tpm (provider.Deployment.RPM/TPM, caps
// per minute held cluster-wide, also simple-shuffle weights), order, weight,
// max_parallel_requests; and its price per token for cost-based-routing.
type Params struct {
	// Order is litellm_params.order (>= 1; 0 = unset): when any deployment of a group sets
	// one, only the healthy deployments of the lowest order are routed to (LiteLLM
	// _get_order_filtered_deployments); the next order takes over when all of those are
	// cooling down or at their caps.
	Order int
	// Weight is litellm_params.weight (> 0; 0 = unset), simple-shuffle's weight.
	Weight float64
	// MaxParallel is litellm_params.max_parallel_requests (0 = unlimited): calls in flight
	// on this deployment at once, per replica (LiteLLM: per instance semaphore).
	MaxParallel int64
	// Cost is model_info.input_cost_per_token + output_cost_per_token (USD), +Inf when neither
	// is set: cost-based-routing routes to the cheapest.
	Cost float64
}

// parseParams reads the routing parameters; errors name the field.
func parseParams(litellmParams, modelInfo []byte) (Params, error) {
	p := gjson.ParseBytes(litellmParams)
	var out Params
	if v := p.Get("order"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num != math.Trunc(v.Num) || v.Num < 1 || v.Num > math.MaxInt32 {
			return out, fmt.Errorf("litellm_params.order: must be an integer >= 1, got %s", v.Raw)
		}
		out.Order = int(v.Num)
	}
	if v := p.Get("weight"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.Number || math.IsNaN(v.Num) || math.IsInf(v.Num, 0) || v.Num <= 0 {
			return out, fmt.Errorf("litellm_params.weight: must be a number > 0, got %s", v.Raw)
		}
		out.Weight = v.Num
	}
	if v := p.Get("max_parallel_requests"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num != math.Trunc(v.Num) || v.Num < 1 || v.Num > math.MaxInt32 {
			return out, fmt.Errorf("litellm_params.max_parallel_requests: must be an integer >= 1, got %s", v.Raw)
		}
		out.MaxParallel = int64(v.Num)
	}
	// prices as spend reads them (model_info, pkg/spend.Cost); a missing or non-number price
	// leaves the deployment unpriced here (validating prices is the model write path's job)
	mi := gjson.ParseBytes(modelInfo)
	in, out2 := mi.Get("input_cost_per_token"), mi.Get("output_cost_per_token")
	out.Cost = math.Inf(1)
	if in.Type == gjson.Number || out2.Type == gjson.Number {
		out.Cost = max(in.Num, 0) + max(out2.Num, 0)
	}
	return out, nil
}
