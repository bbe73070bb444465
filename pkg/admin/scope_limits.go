package admin

import (
	"encoding/json"
	"strings"

	"lockstep/pkg/keys"
	"lockstep/pkg/limits"
)

// raisedLimits names the limits a /key/update req raises on key cur, in request order joined by
// "/" ("" none): rpm_limit, tpm_limit or max_parallel_requests set above the key's current
// value, or cleared (null) where the key has one; model_rpm_limit / model_tpm_limit (which
// replace the key's maps) dropping a model the key limits, or setting it higher. Lowering a
// limit, setting one where the key has none, or repeating it is not raising. Source: API.md
// "Roles and self-service" ("No role raises its own role, limits or budget"); the same rule as
// LiteLLM's _validate_update_key_data for max_budget.
func raisedLimits(req *KeyRequest, cur *keys.Key) string {
	var raised []string
	for _, f := range []struct {
		name string
		o    optional
		has  bool
		cur  int64
	}{{"rpm_limit", req.RPMLimit, cur.Limits.HasRPM, cur.Limits.RPM},
		{"tpm_limit", req.TPMLimit, cur.Limits.HasTPM, cur.Limits.TPM},
		{"max_parallel_requests", req.MaxParallel, cur.Limits.HasParallel, cur.Limits.Parallel}} {
		if f.o.set && f.has && intRaised(f.o.raw, f.cur) {
			raised = append(raised, f.name)
		}
	}
	ml := cur.X().ModelLimits
	for _, f := range []struct {
		name string
		of   func(limits.Limits) (int64, bool)
	}{{"model_rpm_limit", func(l limits.Limits) (int64, bool) { return l.RPM, l.HasRPM }},
		{"model_tpm_limit", func(l limits.Limits) (int64, bool) { return l.TPM, l.HasTPM }}} {
		raw, ok := req.Extra[f.name]
		if !ok {
			continue
		}
		var next map[string]json.RawMessage
		if !isNull(raw) && json.Unmarshal(raw, &next) != nil {
			continue // not a map: the decoder's 400
		}
		for m, l := range ml {
			if n, has := f.of(l); has {
				if v, given := next[m]; !given || intRaised(v, n) {
					raised = append(raised, f.name)
					break
				}
			}
		}
	}
	return strings.Join(raised, "/")
}

// intRaised reports whether the limit value raw (JSON) is above cur or no limit (null). A value
// that is not an integer is not judged here: the decoder answers it with a 400 naming it.
func intRaised(raw json.RawMessage, cur int64) bool {
	var v int64
	return isNull(raw) || json.Unmarshal(raw, &v) == nil && v > cur
}
