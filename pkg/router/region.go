package router

import (
	"strings"

	"lockstep/pkg/registry"
)

// euMarkers and usMarkers are the region-name fragments LiteLLM's providers list as EU / US
// regions (get_eu_regions / get_us_regions: AWS and GCP "eu-west-1", "europe-west4", Azure
// "westeurope", "swedencentral", "switzerlandnorth", "francecentral", "uksouth").
var euMarkers = [...]string{"eu-", "europe", "sweden", "switzerland", "france", "uk"}

// RegionOf returns the allowed_model_region ("eu", "us" or "") a deployment's
// litellm_params.region_name falls in, as LiteLLM's _is_region_eu / _is_region_us decide it:
// region_name "eu" or "us" itself, else inferred from the name — EU when it contains one of
// euMarkers, US when it is "us-…" (AWS, GCP "us-central1") or an Azure name ending in "us"
// with an optional digit ("eastus", "westus2"). "" when region_name is unset or unknown.
func RegionOf(d *Deployment) string {
	if d.Headers == nil || d.Headers.Region == nil {
		return ""
	}
	r := strings.ToLower(d.Headers.Region[0])
	switch {
	case r == "eu" || r == "us":
		return r
	case strings.HasPrefix(r, "us-") || strings.HasSuffix(strings.TrimRight(r, "0123456789"), "us"):
		return "us"
	}
	for _, m := range euMarkers {
		if strings.Contains(r, m) {
			return "eu"
		}
	}
	return ""
}

// InRegion returns the deployments of group whose region (RegionOf) is region: LiteLLM's
// pre-call check is_region_allowed for an end user's allowed_model_region (litellm/router.py
// _pre_call_checks), which drops a deployment with no known region too. group itself is
// returned when every deployment qualifies (no allocation); an empty result means nothing
// may serve the call (the caller answers NoDeploymentsError with PreCallChecks set).
func InRegion(group []*registry.Entry[*Deployment], region string) []*registry.Entry[*Deployment] {
	n := 0
	for _, e := range group {
		if RegionOf(e.Value) == region {
			n++
		}
	}
	if n == len(group) {
		return group
	}
	out := make([]*registry.Entry[*Deployment], 0, n)
	for _, e := range group {
		if RegionOf(e.Value) == region {
			out = append(out, e)
		}
	}
	return out
}
