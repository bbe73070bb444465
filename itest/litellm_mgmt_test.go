package itest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// Issue 19 items 7, 8, 10 and 12 on replica processes: a management call or an LLM call on
// replica A, its effect observed on replica B.

// TestReadinessDetailsAndPublicRoutes pins item 7: /health/readiness answers LiteLLM's
// db "connected" (and keeps replica_id, sync_state); /health/readiness/details needs a key and
// answers LiteLLM's diagnostics; /routes needs none.
func TestReadinessDetailsAndPublicRoutes(t *testing.T) {
	p := StartPair(t, GatewayOpts{})
	st, b := p.B.DoKey(t, "", "GET", "/health/readiness", nil)
	require.Equal(t, 200, st, "%s", b)
	r := JSON(t, b)
	require.Equal(t, "healthy", r["status"])
	require.Equal(t, "connected", r["db"])
	require.Equal(t, "b", r["replica_id"])
	require.NotEmpty(t, r["sync_state"])

	st, b = p.B.DoKey(t, "", "GET", "/health/readiness/details", nil)
	require.Equal(t, 401, st, "details need a key: %s", b)
	key := agGenKey(t, p.A) // a virtual key made on A
	Eventually(t, "B answers the details to A's key", func() bool {
		st, _ := p.B.DoKey(t, key, "GET", "/health/readiness/details", nil)
		return st == 200
	})
	st, b = p.B.DoKey(t, key, "GET", "/health/readiness/details", nil)
	require.Equal(t, 200, st, "%s", b)
	d := JSON(t, b)
	require.Equal(t, "healthy", d["status"])
	require.Equal(t, "connected", d["db"])
	require.Equal(t, "b", d["replica_id"])
	require.NotEmpty(t, d["litellm_version"])
	for _, f := range []string{"cache", "success_callbacks", "use_aiohttp_transport", "log_level", "is_detailed_debug"} {
		require.Contains(t, d, f)
	}
	require.Nil(t, d["cache"])
	require.Equal(t, []any{}, d["success_callbacks"])

	st, b = p.B.DoKey(t, "", "GET", "/routes", nil)
	require.Equal(t, 200, st, "/routes needs no key: %s", b)
	require.Contains(t, string(b), `"/health/readiness/details"`)
}

// TestKeyGenerateLiteLLM pins item 8's key parts: /key/generate answers token_id (the key's
// hash); a virtual key asking /key/info about a key that does not exist gets 404 "Key not
// found" (as about another's key); a user_id nobody created yet becomes a user with the key,
// seen on B with the key listed; /user/update resets that user's spend.
func TestKeyGenerateLiteLLM(t *testing.T) {
	p := StartPair(t, GatewayOpts{})
	st, b := p.A.Do(t, "POST", "/key/generate", map[string]any{"user_id": "kg-new-user", "key_alias": "kg-alias"})
	require.Equal(t, 200, st, "%s", b)
	k := JSON(t, b)
	require.NotEmpty(t, k["token"])
	require.Equal(t, k["token"], k["token_id"])
	key := k["key"].(string)

	Eventually(t, "B has the new user with its key", func() bool {
		st, b := p.B.Do(t, "GET", "/user/info?user_id=kg-new-user", nil)
		if st != 200 {
			return false
		}
		ks, _ := JSON(t, b)["keys"].([]any)
		return len(ks) == 1
	})
	st, b = p.B.Do(t, "GET", "/user/info?user_id=kg-new-user", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "internal_user", JSON(t, b)["user_info"].(map[string]any)["user_role"])

	// the key (acting as its user, an internal_user) asks about keys that do not exist
	for _, other := range []string{"sk-no-such-key-anywhere", strings.Repeat("ab", 32)} {
		st, b = p.B.DoKey(t, key, "GET", "/key/info?key="+other, nil)
		require.Equal(t, 404, st, "%s", b)
		require.Contains(t, string(b), "Key not found")
	}
	// a plain key (no user) too
	plain := agGenKey(t, p.A)
	Eventually(t, "B knows the plain key", func() bool {
		st, _ := p.B.DoKey(t, plain, "GET", "/key/info", nil)
		return st == 200
	})
	st, b = p.B.DoKey(t, plain, "GET", "/key/info?key=sk-no-such-key-anywhere", nil)
	require.Equal(t, 404, st, "%s", b)

	// two keys for one more new user at once, one on each replica: both made, one user
	errs := make(chan string, 2)
	for _, g := range []*Gateway{p.A, p.B} {
		go func(g *Gateway) {
			st, b := g.Do(t, "POST", "/key/generate", map[string]any{"user_id": "kg-race-user"})
			if st != 200 {
				errs <- fmt.Sprintf("%d %s", st, b)
				return
			}
			errs <- ""
		}(g)
	}
	for range 2 {
		require.Empty(t, <-errs)
	}
	st, b = p.A.Do(t, "GET", "/user/info?user_id=kg-race-user", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Len(t, JSON(t, b)["keys"], 2)
}

// TestTeamMemberEmailNull pins item 12: a member added by user_id only answers user_email
// null (LiteLLM's Member), on the replica that did not write it; a member by email has its
// user_id.
func TestTeamMemberEmailNull(t *testing.T) {
	p := StartPair(t, GatewayOpts{})
	st, b := p.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "tme", "members_with_roles": []any{
		map[string]any{"user_id": "tme-u", "role": "user"}, map[string]any{"user_email": "tme@example.com", "role": "admin"}}})
	require.Equal(t, 200, st, "%s", b)
	check := func(b []byte, path ...string) {
		m := JSON(t, b)
		for _, f := range path {
			m = m[f].(map[string]any)
		}
		ms := m["members_with_roles"].([]any)
		require.Len(t, ms, 2, "%s", b)
		byID := ms[0].(map[string]any)
		require.Contains(t, byID, "user_email")
		require.Nil(t, byID["user_email"], "%s", b)
		require.Equal(t, "tme-u", byID["user_id"])
		byEmail := ms[1].(map[string]any)
		require.Equal(t, "tme@example.com", byEmail["user_email"])
		require.NotEmpty(t, byEmail["user_id"])
	}
	check(b)
	Eventually(t, "B has the team", func() bool {
		st, _ := p.B.Do(t, "GET", "/team/info?team_id=tme", nil)
		return st == 200
	})
	st, b = p.B.Do(t, "GET", "/team/info?team_id=tme", nil)
	require.Equal(t, 200, st, "%s", b)
	check(b, "team_info")
}

// TestProxyBudget pins item 8's proxy-wide budget: litellm_settings max_budget makes every
// call count toward the user litellm-proxy-budget (made at start, with its max_budget and
// budget_duration); once the spend of calls on A reached it, B refuses a virtual key's call
// (400 budget_exceeded, LiteLLM's text) while the master key is still served.
func TestProxyBudget(t *testing.T) {
	cfg := "litellm_settings:\n  max_budget: 0.05\n  budget_duration: 30d\n"
	p := StartPair(t, GatewayOpts{Config: cfg})
	st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "pb-model",
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
		"model_info":     map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.001}})
	require.Equal(t, 200, st, "%s", b)
	st, b = p.B.Do(t, "GET", "/user/info?user_id=litellm-proxy-budget", nil)
	require.Equal(t, 200, st, "%s", b)
	ui := JSON(t, b)["user_info"].(map[string]any)
	require.Equal(t, 0.05, ui["max_budget"])
	require.Equal(t, "30d", ui["budget_duration"])

	key := agGenKey(t, p.A)
	Eventually(t, "B serves the key", func() bool { st, _ := agChat(t, p.B, key, "pb-model"); return st == 200 })
	// 10 prompt + 20 completion tokens a call at 0.001: 0.03 a call; two calls pass 0.05
	for i := 0; i < 2; i++ {
		st, b := agChat(t, p.A, key, "pb-model")
		require.Equal(t, 200, st, "%s", b)
	}
	var body []byte
	Eventually(t, "B refuses the key once the proxy's spend reached its budget", func() bool {
		st, b := agChat(t, p.B, key, "pb-model")
		body = b
		return st == 400
	})
	typ, msg := agOpenAIError(t, body)
	require.Equal(t, "budget_exceeded", typ)
	require.Regexp(t, `^Budget has been exceeded! Current cost: 0\.\d+, Max budget: 0\.05$`, msg)
	st, b = agChat(t, p.B, MasterKey, "pb-model")
	require.Equal(t, 200, st, "the master key is not refused: %s", b)
	// every call served (B may admit one more before its view of the proxy's spend catches
	// up, as a key's budget) counts toward the proxy user, whoever made it: the master key too
	Eventually(t, "A reads the proxy user's spend of every call", func() bool {
		total := agScalar[float64](t, p.DB, "SELECT coalesce(sum(spend), 0) FROM gateway.spend_logs")
		st, b := p.A.Do(t, "GET", "/user/info?user_id=litellm-proxy-budget", nil)
		return st == 200 && total >= 0.12-1e-9 && fmt.Sprintf("%.6f", JSON(t, b)["user_info"].(map[string]any)["spend"]) == fmt.Sprintf("%.6f", total)
	})
	st, b = p.B.Do(t, "GET", "/global/spend", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, 0.05, JSON(t, b)["max_budget"])
}

// TestImagePricedPerImage pins item 8's image pricing: an image generation costs
// output_cost_per_image × the images answered (LiteLLM's model_info field), not 0; the spend
// is in B's spend logs and the key's spend.
func TestImagePricedPerImage(t *testing.T) {
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "img-model",
		"litellm_params": map[string]any{"model": "openai/dall-e-3", "api_base": up.URL + "/v1", "api_key": "sk-up"},
		"model_info":     map[string]any{"output_cost_per_image": 0.04, "input_cost_per_image": 0.5}})
	require.Equal(t, 200, st, "%s", b)
	key := agGenKey(t, p.A)
	st, _, body := postAs(t, p.A, key, "/v1/images/generations", map[string]any{"model": "img-model", "prompt": "a cat", "n": 2}, nil)
	require.Equal(t, 200, st, "%s", body)
	token := JSON(t, mustInfo(t, p.A, key))["info"].(map[string]any)["token"].(string)
	Eventually(t, "B's spend logs price the call per image", func() bool {
		st, b := p.B.Do(t, "GET", "/spend/logs?api_key="+token, nil)
		if st != 200 {
			return false
		}
		var logs []map[string]any
		_ = json.Unmarshal(b, &logs)
		return len(logs) == 1 && fmt.Sprint(logs[0]["spend"]) == "0.08"
	})
	Eventually(t, "the key's spend on B", func() bool {
		return fmt.Sprint(JSON(t, mustInfo(t, p.B, key))["info"].(map[string]any)["spend"]) == "0.08"
	})
}

func mustInfo(t *testing.T, g *Gateway, key string) []byte {
	t.Helper()
	st, b := g.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", b)
	return b
}

// TestSpendLogsLiteLLM pins item 10: calls made on A are, on B, in /spend/logs under the
// response id the client saw (?request_id= finds exactly that call) with LiteLLM's metadata
// keys; the /global/spend/* reports and /global/activity answer their LiteLLM shapes with the
// calls' figures; an internal user's reports are its own.
func TestSpendLogsLiteLLM(t *testing.T) {
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	for _, r := range []struct {
		path string
		body map[string]any
	}{
		{"/organization/new", map[string]any{"organization_id": "sl-org", "organization_alias": "SL Org"}},
		{"/team/new", map[string]any{"team_id": "sl-team", "team_alias": "SL Team", "organization_id": "sl-org"}},
		{"/user/new", map[string]any{"user_id": "sl-user", "user_role": "internal_user", "auto_create_key": false}},
		{"/model/new", map[string]any{"model_name": "sl-model", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
			"model_info": map[string]any{"id": "sl-model-id", "input_cost_per_token": 0.001, "output_cost_per_token": 0.001}}},
	} {
		st, body := a.Do(t, "POST", r.path, r.body)
		require.Equal(t, 200, st, "%s: %s", r.path, body)
	}
	st, body := a.Do(t, "POST", "/key/generate", map[string]any{"team_id": "sl-team", "user_id": "sl-user", "key_alias": "sl-key"})
	require.Equal(t, 200, st, "%s", body)
	key, token := JSON(t, body)["key"].(string), JSON(t, body)["token"].(string)
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"user_id": "sl-user", "key_alias": "sl-own"})
	require.Equal(t, 200, st, "%s", body)
	ownKey := JSON(t, body)["key"].(string)
	other := agGenKey(t, a)

	var ids []string
	for i := 0; i < 3; i++ {
		st, h, body := postAs(t, a, key, "/v1/chat/completions", map[string]any{"model": "sl-model", "user": "sl-customer",
			"metadata": map[string]any{"tags": []string{"tag-a", fmt.Sprintf("tag-%d", i)}},
			"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil)
		require.Equal(t, 200, st, "%s", body)
		id, _ := JSON(t, body)["id"].(string)
		require.NotEmpty(t, id)
		require.NotEqual(t, id, h.Get("x-litellm-call-id"))
		ids = append(ids, id)
	}
	st, _, body = postAs(t, a, other, "/v1/chat/completions", map[string]any{"model": "sl-model",
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil)
	require.Equal(t, 200, st, "%s", body)
	st, _, body = postAs(t, a, ownKey, "/v1/chat/completions", map[string]any{"model": "sl-model",
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil)
	require.Equal(t, 200, st, "%s", body)

	var logs []map[string]any
	Eventually(t, "B lists the call under the response id", func() bool {
		st, body := b.Do(t, "GET", "/spend/logs?request_id="+ids[1], nil)
		logs = nil
		return st == 200 && json.Unmarshal(body, &logs) == nil && len(logs) == 1
	})
	l := logs[0]
	require.Equal(t, ids[1], l["request_id"])
	require.NotEqual(t, ids[1], l["call_id"])
	require.Equal(t, token, l["api_key"])
	require.Equal(t, "sl-customer", l["end_user"])
	require.Equal(t, []any{"tag-a", "tag-1"}, l["request_tags"])
	meta := l["metadata"].(map[string]any)
	require.Equal(t, map[string]any{"user_api_key": token, "user_api_key_alias": "sl-key", "user_api_key_team_id": "sl-team",
		"user_api_key_team_alias": "SL Team", "user_api_key_org_id": "sl-org", "user_api_key_user_id": "sl-user",
		"user_api_key_end_user_id": "sl-customer", "user_api_key_project_id": nil, "status": "success", "litellm_call_id": l["call_id"]}, meta)
	// the call id finds it too; an unknown id nothing
	st, body = b.Do(t, "GET", "/spend/logs?request_id="+l["call_id"].(string), nil)
	require.Equal(t, 200, st, "%s", body)
	require.NoError(t, json.Unmarshal(body, &logs))
	require.Len(t, logs, 1)
	st, body = b.Do(t, "GET", "/spend/logs?request_id=chatcmpl-nope", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "[]", strings.TrimSpace(string(body)))
	Eventually(t, "B's logs hold all five calls", func() bool {
		st, body := b.Do(t, "GET", "/spend/logs", nil)
		logs = nil
		return st == 200 && json.Unmarshal(body, &logs) == nil && len(logs) == 5
	})

	today := time.Now().UTC().Format("2006-01-02")
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")
	get := func(g *Gateway, k, path string) any {
		t.Helper()
		st, body := g.DoKey(t, k, "GET", path, nil)
		require.Equal(t, 200, st, "%s: %s", path, body)
		var v any
		require.NoError(t, json.Unmarshal(body, &v))
		return v
	}
	// /global/spend: 5 calls × 0.03
	require.InDelta(t, 0.15, get(b, MasterKey, "/global/spend").(map[string]any)["spend"], 1e-9)
	// /global/spend/logs: one day
	days := get(b, MasterKey, "/global/spend/logs").([]any)
	require.Len(t, days, 1)
	require.Equal(t, today, days[0].(map[string]any)["date"])
	require.InDelta(t, 0.15, days[0].(map[string]any)["spend"], 1e-9)
	perKey := get(b, MasterKey, "/global/spend/logs?api_key="+key).([]any)
	require.InDelta(t, 0.09, perKey[0].(map[string]any)["spend"], 1e-9)
	// /global/spend/keys: the team key first, with its alias
	ks := get(b, MasterKey, "/global/spend/keys?limit=2").([]any)
	require.Len(t, ks, 2)
	require.Equal(t, token, ks[0].(map[string]any)["api_key"])
	require.Equal(t, "sl-key", ks[0].(map[string]any)["key_alias"])
	require.InDelta(t, 0.09, ks[0].(map[string]any)["total_spend"], 1e-9)
	st, body = b.Do(t, "GET", "/global/spend/keys?limit=0", nil)
	require.Equal(t, 422, st, "%s", body)
	// /global/spend/teams
	teams := get(b, MasterKey, "/global/spend/teams").(map[string]any)
	require.ElementsMatch(t, []any{"SL Team", "Unassigned"}, teams["teams"])
	require.Equal(t, map[string]any{"team_id": "SL Team", "total_spend": 0.09}, teams["total_spend_per_team"].([]any)[0])
	require.Equal(t, today, teams["daily_spend"].([]any)[0].(map[string]any)["date"])
	// /global/spend/models, /global/spend/provider
	require.Equal(t, []any{map[string]any{"model": "sl-model", "total_spend": 0.15}}, roundAll(get(b, MasterKey, "/global/spend/models")))
	require.Equal(t, []any{map[string]any{"provider": "openai", "spend": 0.15}}, roundAll(get(b, MasterKey, "/global/spend/provider?start_date="+today+"&end_date="+tomorrow)))
	st, body = b.Do(t, "GET", "/global/spend/provider", nil)
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Please provide start_date and end_date")
	// POST /global/spend/end_users
	st, body = b.Do(t, "POST", "/global/spend/end_users", map[string]any{"api_key": key})
	require.Equal(t, 200, st, "%s", body)
	var eus []map[string]any
	require.NoError(t, json.Unmarshal(body, &eus))
	require.Len(t, eus, 1)
	require.Equal(t, "sl-customer", eus[0]["end_user"])
	require.EqualValues(t, 3, eus[0]["total_count"])
	// /global/spend/report: per team by day, per key, per customer
	rep := get(b, MasterKey, "/global/spend/report?start_date="+today+"&end_date="+tomorrow).([]any)
	require.Len(t, rep, 1)
	var names []any
	for _, tm := range rep[0].(map[string]any)["teams"].([]any) {
		names = append(names, tm.(map[string]any)["team_name"])
	}
	require.ElementsMatch(t, []any{"SL Team", "Unassigned Team"}, names)
	byKey := get(b, MasterKey, "/global/spend/report?start_date="+today+"&end_date="+tomorrow+"&api_key="+key).([]any)
	require.Len(t, byKey, 1)
	require.InDelta(t, 0.09, byKey[0].(map[string]any)["total_cost"], 1e-9)
	require.EqualValues(t, 30, byKey[0].(map[string]any)["total_input_tokens"])
	require.EqualValues(t, 60, byKey[0].(map[string]any)["total_output_tokens"])
	cust := get(b, MasterKey, "/global/spend/report?start_date="+today+"&end_date="+tomorrow+"&group_by=customer").([]any)
	require.Len(t, cust, 1)
	require.Len(t, cust[0].(map[string]any)["customers"], 2)
	// /global/activity(/model)
	act := get(b, MasterKey, "/global/activity?start_date="+today+"&end_date="+today).(map[string]any)
	require.EqualValues(t, 5, act["sum_api_requests"])
	require.EqualValues(t, 150, act["sum_total_tokens"])
	require.Equal(t, time.Now().UTC().Format("Jan 02"), act["daily_data"].([]any)[0].(map[string]any)["date"])
	am := get(b, MasterKey, "/global/activity/model?start_date="+today+"&end_date="+today).([]any)
	require.Equal(t, "sl-model", am[0].(map[string]any)["model"])
	// request tags (metadata.tags): per tag, all names, the legacy /spend/tags
	tags := get(b, MasterKey, "/global/spend/tags?start_date="+today+"&end_date="+today).(map[string]any)["spend_per_tag"].([]any)
	require.Len(t, tags, 4)
	require.Equal(t, map[string]any{"name": "tag-a", "spend": 0.09, "log_count": 3.0}, tags[0])
	one := get(b, MasterKey, "/global/spend/tags?start_date="+today+"&end_date="+today+"&tags=tag-2").(map[string]any)["spend_per_tag"].([]any)
	require.Equal(t, []any{map[string]any{"name": "tag-2", "spend": 0.03, "log_count": 1.0}}, one)
	require.ElementsMatch(t, []any{"tag-a", "tag-0", "tag-1", "tag-2"}, get(b, MasterKey, "/global/spend/all_tag_names").(map[string]any)["tag_names"])
	legacy := get(b, MasterKey, "/spend/tags").([]any)
	require.Equal(t, "tag-a", legacy[0].(map[string]any)["individual_request_tag"])
	require.EqualValues(t, 3, legacy[0].(map[string]any)["log_count"])

	// the internal user's own reports (its two keys' four calls), never the other key's
	Eventually(t, "B knows the user's own key", func() bool {
		st, _ := b.DoKey(t, ownKey, "GET", "/key/info", nil)
		return st == 200
	})
	mine := get(b, ownKey, "/global/spend/keys").([]any)
	require.Len(t, mine, 2)
	for _, k := range mine {
		require.NotEqual(t, JSON(t, mustInfo(t, b, other))["info"].(map[string]any)["token"], k.(map[string]any)["api_key"])
	}
	myAct := get(b, ownKey, "/global/activity?start_date="+today+"&end_date="+today).(map[string]any)
	require.EqualValues(t, 4, myAct["sum_api_requests"])
	st, body = b.DoKey(t, ownKey, "GET", "/global/spend/report?start_date="+today+"&end_date="+tomorrow, nil)
	require.Equal(t, 403, st, "%s", body)

	// /global/spend/reset: every key's and team's spend 0, logs kept
	st, body = a.Do(t, "POST", "/global/spend/reset", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "Spend for all API Keys and Teams reset successfully", JSON(t, body)["message"])
	Eventually(t, "B reads the key's spend as 0", func() bool {
		return JSON(t, mustInfo(t, b, key))["info"].(map[string]any)["spend"] == 0.0
	})
	require.InDelta(t, 0.15, get(b, MasterKey, "/global/spend").(map[string]any)["spend"], 1e-9)
}

// roundAll rounds every float of a decoded JSON value to 9 places (sums of prices).
func roundAll(v any) any {
	switch x := v.(type) {
	case []any:
		for i := range x {
			x[i] = roundAll(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = roundAll(x[k])
		}
	case float64:
		var f float64
		_, _ = fmt.Sscanf(fmt.Sprintf("%.9f", x), "%g", &f)
		return f
	}
	return v
}
