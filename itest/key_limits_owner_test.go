package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// An internal user does not raise or remove the rate limits the proxy admin put on its key
// (API.md "No role raises its own role, limits or budget"): /key/update raising rpm_limit,
// tpm_limit, max_parallel_requests or a model_rpm_limit / model_tpm_limit entry, or clearing
// one, is a 403 naming the fields and nothing is written. Lowering a limit, or repeating it,
// still updates.
func TestKeyOwnerCannotRaiseKeyLimits(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/user/new", map[string]any{"user_id": "lowner", "user_role": "internal_user", "auto_create_key": false})
	require.Equal(t, 200, st, "%s", body)
	key, _ := govKey(t, p.A, map[string]any{"user_id": "lowner", "rpm_limit": 10, "tpm_limit": 1000,
		"max_parallel_requests": 2, "model_rpm_limit": map[string]any{"m": 5}, "model_tpm_limit": map[string]any{"m": 500}})
	Eventually(t, "B serves the key", func() bool {
		st, _ := p.B.DoKey(t, key, "GET", "/key/info", nil)
		return st == 200
	})
	for _, c := range []struct {
		upd  map[string]any
		text string
	}{
		{map[string]any{"rpm_limit": 1000000}, "rpm_limit"},
		{map[string]any{"tpm_limit": nil}, "tpm_limit"},
		{map[string]any{"max_parallel_requests": 3, "rpm_limit": 9}, "max_parallel_requests"},
		{map[string]any{"rpm_limit": 11, "tpm_limit": 2000}, "rpm_limit/tpm_limit"},
		{map[string]any{"model_rpm_limit": map[string]any{"m": 50}}, "model_rpm_limit"},
		{map[string]any{"model_tpm_limit": map[string]any{"other": 1}}, "model_tpm_limit"},
		{map[string]any{"model_rpm_limit": nil}, "model_rpm_limit"},
	} {
		c.upd["key"] = key
		st, body := p.B.DoKey(t, key, "POST", "/key/update", c.upd)
		require.Equal(t, 403, st, "%v: %s", c.upd, body)
		require.Equal(t, "Only proxy admins, team admins, or org admins can call /key/update ("+c.text+"). user_role=internal_user, user_id=lowner",
			gjson.GetBytes(body, "error.message").Str, "%s", body)
	}
	st, body = p.A.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", body)
	for f, want := range map[string]float64{"rpm_limit": 10, "tpm_limit": 1000, "max_parallel_requests": 2, "model_rpm_limit.m": 5, "model_tpm_limit.m": 500} {
		require.Equal(t, want, gjson.GetBytes(body, "info."+f).Float(), "%s unchanged: %s", f, body)
	}
	st, body = p.B.DoKey(t, key, "POST", "/key/update", map[string]any{"key": key, "rpm_limit": 4, "tpm_limit": 1000,
		"max_parallel_requests": 1, "model_rpm_limit": map[string]any{"m": 2}})
	require.Equal(t, 200, st, "lowering is the owner's: %s", body)
	require.Equal(t, 4.0, gjson.GetBytes(body, "rpm_limit").Float(), "%s", body)
}
