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

// Issue 19 item 4: the region pre-call check's 429 (no deployment of the group in the end
// user's allowed_model_region) starts the group's fallbacks as LiteLLM's router does for a
// RouterRateLimitError: the fallback group is routed (in the end user's region) and answers.
// Without a fallback in the region the 429 stands.
func TestRegionMissFallsBack(t *testing.T) {
	t.Parallel()
	cfg := "router_settings:\n  num_retries: 0\n  fallbacks: [{rf-usonly: [rf-eu]}, {rf-usonly2: [rf-usonly3]}]\n"
	p := StartPair(t, GatewayOpts{Config: cfg})
	up := fakeupstream.Start(t)
	rtNewModel(t, p.A, "rf-usonly", "rf-us", up, map[string]any{"region_name": "us-east-1"})
	rtNewModel(t, p.A, "rf-eu", "rf-eu-id", up, map[string]any{"region_name": "eu-west-1"})
	rtNewModel(t, p.A, "rf-usonly2", "rf-us2", up, map[string]any{"region_name": "us-east-1"})
	rtNewModel(t, p.A, "rf-usonly3", "rf-us3", up, map[string]any{"region_name": "us-west-2"})
	st, b := p.A.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "rf-cust", "allowed_model_region": "eu"})
	require.Equal(t, 200, st, "%s", b)

	Eventually(t, "B knows every group and the end user", func() bool {
		st, h, _ := fbChat(t, p.B, MasterKey, map[string]any{"model": "rf-usonly", "user": "rf-cust"}, nil)
		st2, _, _ := fbChat(t, p.B, MasterKey, map[string]any{"model": "rf-usonly2", "user": "rf-cust"}, nil)
		return st == 200 && h.Get("x-litellm-model-id") == "rf-eu-id" && st2 == 429
	})
	st, h, b := fbChat(t, p.B, MasterKey, map[string]any{"model": "rf-usonly", "user": "rf-cust"}, nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "rf-eu-id", h.Get("x-litellm-model-id"))
	require.Equal(t, "eu-west-1", h.Get("x-litellm-model-region"))
	require.Equal(t, "1", h.Get("x-litellm-attempted-fallbacks"))
	// an anonymous caller is served by the group itself
	st, h, b = fbChat(t, p.B, MasterKey, map[string]any{"model": "rf-usonly"}, nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "rf-us", h.Get("x-litellm-model-id"))
	// a fallback outside the region too: the first 429 is the answer, and it says a fallback
	// was tried (LiteLLM sets x-litellm-attempted-fallbacks on a failure too)
	st, h, b = fbChat(t, p.B, MasterKey, map[string]any{"model": "rf-usonly2", "user": "rf-cust"}, nil)
	require.Equal(t, 429, st, "%s", b)
	require.Equal(t, "1", h.Get("x-litellm-attempted-fallbacks"))
	require.Equal(t, "No deployments available for selected model, Try again in 1 seconds. Passed model=rf-usonly2. pre-call-checks=True, cooldown_list=[]",
		fbErr(t, b)["message"])
}
