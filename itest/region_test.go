package itest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// Issue 19 item 4, region routing (LiteLLM's customer routing, router._pre_call_checks
// is_region_allowed): an end user created on a with allowed_model_region "eu" is routed on b
// only to the deployments whose region_name is in the EU, and gets LiteLLM's "No deployments
// available" 429 (pre-call-checks=True) for a group with none there.
func TestRegionRouting(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	up := fakeupstream.Start(t)
	rtNewModel(t, p.A, "rg-main", "rg-eu", up, map[string]any{"region_name": "eu-west-1"})
	rtNewModel(t, p.A, "rg-main", "rg-us", up, map[string]any{"region_name": "us-east-1"})
	rtNewModel(t, p.A, "rg-usonly", "rg-us2", up, map[string]any{"region_name": "us-east-1"})
	st, b := p.A.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "rg-cust", "allowed_model_region": "eu"})
	require.Equal(t, 200, st, "%s", b)

	chat := func(model, user string) (int, string, string, []byte) {
		body := map[string]any{"model": model}
		if user != "" {
			body["user"] = user
		}
		st, h, b := fbChat(t, p.B, MasterKey, body, nil)
		return st, h.Get("x-litellm-model-id"), h.Get("x-litellm-model-region"), b
	}
	// B has both rg-main deployments (an anonymous caller reaches the us one) and the end
	// user's region (rg-usonly, known there, is refused to it)
	Eventually(t, "B routes an anonymous caller to the us deployment", func() bool {
		_, id, _, _ := chat("rg-main", "")
		return id == "rg-us"
	})
	Eventually(t, "B knows rg-usonly", func() bool { st, _, _, _ := chat("rg-usonly", ""); return st == 200 })
	Eventually(t, "B refuses rg-usonly to the eu end user", func() bool { st, _, _, _ := chat("rg-usonly", "rg-cust"); return st == 429 })
	st, _, _, b = chat("rg-usonly", "rg-cust")
	require.Equal(t, 429, st, "%s", b)
	require.Equal(t, "rate_limit_error", fbErr(t, b)["type"])
	require.Equal(t, "No deployments available for selected model, Try again in 1 seconds. Passed model=rg-usonly. pre-call-checks=True, cooldown_list=[]",
		fbErr(t, b)["message"])

	// the eu end user always reaches the eu deployment
	for range 30 {
		st, id, region, b := chat("rg-main", "rg-cust")
		require.Equal(t, 200, st, "%s", b)
		require.Equal(t, "rg-eu", id)
		require.Equal(t, "eu-west-1", region)
	}
}
