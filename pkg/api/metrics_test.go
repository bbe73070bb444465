package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/router"
)

// Every request is counted in its (route, method, status) series and timed in its route's
// histogram, whichever series the cached observers were first made for.
func TestRequestMetricsSeries(t *testing.T) {
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{"m1": mustDeployment(t, "m1", "m", `{"model":"openai/x","mock_response":"pong"}`, "")})
	for range 3 {
		require.Equal(t, 200, b.do(t, "sk-master", "POST", "/v1/chat/completions", `{"model":"m","messages":[]}`).Code)
	}
	require.Equal(t, 400, b.do(t, "sk-master", "POST", "/v1/chat/completions", `{"model":"nope","messages":[]}`).Code)
	require.Equal(t, 401, b.do(t, "sk-wrong", "POST", "/chat/completions", `{"model":"m","messages":[]}`).Code)
	require.Equal(t, 404, b.do(t, "sk-master", "GET", "/no/such/route", "").Code)
	out := b.do(t, "sk-master", "GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`lockstep_http_requests_total{method="POST",route="/v1/chat/completions",status="200"} 3`,
		`lockstep_http_requests_total{method="POST",route="/v1/chat/completions",status="400"} 1`,
		`lockstep_http_requests_total{method="POST",route="/chat/completions",status="401"} 1`,
		`lockstep_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`lockstep_http_request_duration_seconds_count{route="/v1/chat/completions"} 4`,
		`lockstep_http_request_duration_seconds_count{route="/chat/completions"} 1`,
	} {
		require.True(t, strings.Contains(out, want), "missing %s in\n%s", want, out)
	}
}
