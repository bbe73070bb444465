package router

import (
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"lockstep/pkg/provider"
)

// Headers are a deployment's values of LiteLLM's response headers (litellm/proxy/
// common_request_processing.py get_custom_headers), each a one-value slice built once so the
// hot path assigns them under their canonical keys without allocating (cap 1: an Add appends
// to a copy).
type Headers struct {
	ModelID []string // x-litellm-model-id: model_info.id (the model_id)
	Region  []string // x-litellm-model-region: litellm_params.region_name; nil when unset
	Timeout []string // x-litellm-timeout: the deployment's timeout in seconds
}

func newHeaders(d *provider.Deployment, litellmParams []byte) *Headers {
	h := &Headers{ModelID: []string{d.ModelID}, Timeout: []string{Seconds(d.Timeout)}}
	if r := gjson.GetBytes(litellmParams, "region_name"); r.Type == gjson.String && r.Str != "" {
		h.Region = []string{r.Str}
	}
	return h
}

// Seconds formats a duration as LiteLLM prints a timeout: seconds, the shortest decimal
// ("600", "0.5").
func Seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
