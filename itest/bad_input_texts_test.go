package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Bad input answers a 400 (422 for LiteLLM's query validation) naming the field and what is
// expected, not Go internals: /global/spend/end_users with a body that is not an object or a
// startTime/endTime that is not a date; /global/spend/keys?limit= overflowing an integer;
// max_budget 1e400 (out of float64 range) on /key/generate, /user/new and /team/new.
func TestBadInputTextsNameTheField(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	for _, c := range []struct {
		method, path, body string
		status             int
		text               string
	}{
		{"POST", "/global/spend/end_users", `[1]`, 400, "malformed JSON body: the body must be a JSON object, got array"},
		{"POST", "/global/spend/end_users", `{"startTime":"garbage"}`, 400, `startTime must be a date YYYY-MM-DD or an RFC 3339 time, got "garbage"`},
		{"POST", "/global/spend/end_users", `{"endTime":"2024-13-01"}`, 400, `endTime must be a date YYYY-MM-DD or an RFC 3339 time, got "2024-13-01"`},
		{"GET", "/global/spend/keys?limit=99999999999999999999", "", 422, "Invalid limit: 99999999999999999999, error: Limit is too large: at most 9223372036854775807"},
		{"GET", "/global/spend/keys?limit=ten", "", 422, "Invalid limit: ten, error: Limit must be a valid integer"},
		{"GET", "/global/spend/keys?limit=0", "", 422, "Invalid limit: 0, error: Limit must be greater than 0"},
		{"POST", "/key/generate", `{"max_budget":1e400}`, 400, "max_budget is out of range: a number must be at most 1.7976931348623157e+308, got 1e400"},
		{"POST", "/user/new", `{"user_id":"big","max_budget":1e400}`, 400, "max_budget is out of range: a number must be at most 1.7976931348623157e+308, got 1e400"},
		{"POST", "/team/new", `{"team_id":"big","max_budget":1e400}`, 400, "max_budget is out of range: a number must be at most 1.7976931348623157e+308, got 1e400"},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		st, out := p.B.Do(t, c.method, c.path, body)
		require.Equal(t, c.status, st, "%s %s %s: %s", c.method, c.path, c.body, out)
		msg := gjson.GetBytes(out, "error.message").Str
		if msg == "" {
			msg = gjson.GetBytes(out, "detail.error").Str
		}
		require.Equal(t, c.text, msg, "%s %s %s: %s", c.method, c.path, c.body, out)
	}
	st, out := p.B.Do(t, "POST", "/global/spend/end_users", `{"startTime":"2024-01-01","endTime":"2024-01-02T00:00:00Z"}`)
	require.Equal(t, 200, st, "a date and an RFC 3339 time: %s", out)
}
