package call

import (
	"context"
	"fmt"
	"lockstep/pkg/format"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"lockstep/pkg/provider"
	"lockstep/pkg/router"
)

// Request hooks (API.md "Compatibility policy"; LiteLLM litellm/router.py and litellm/main.py):
// members of the request body LiteLLM reads and removes before the call, and the
// x-litellm-timeout request header.
//
//   - fallbacks: the request's fallback model groups (Serve, fallbacks.go);
//   - mock_testing_fallbacks: true: the call to the requested model group fails with a 500
//     "litellm.InternalServerError: This is a mock exception for model=<m>, to trigger a
//     fallback. Fallbacks=<fallbacks>", after access, limits and guardrails, so its fallbacks
//     run (router.py async_function_with_fallbacks); fallback calls are not mocked;
//   - mock_testing_rate_limit_error: true: every call (fallbacks too) fails with a 429
//     "litellm.RateLimitError: This is a mock exception for model=<m>, to trigger a rate limit
//     error." (router.py async_function_with_retries);
//   - mock_timeout: true: every call waits the request's timeout (the x-litellm-timeout
//     header, else the body's "timeout" in seconds, else the deployment's timeout) and fails
//     with a 408 "litellm.Timeout: This is a mock timeout error" (main.py
//     _handle_mock_timeout_async). Its retries are not repeated;
//   - x-litellm-timeout (header): the call's timeout in seconds, replacing the deployment's
//     timeout and stream_timeout for each upstream call (LiteLLM docs "Request Headers");
//     answered back as x-litellm-timeout.
//
// Each mock flag must be a boolean, the header (and "timeout" with mock_timeout) a number of
// seconds > 0: else an *Invalid (400) naming it. Mock failures are recorded like any failed call (spend log, limits).
var hookFields = [...]string{"fallbacks", "mock_testing_fallbacks", "mock_testing_rate_limit_error", "mock_timeout", "timeout"}

// the hooks' positions in hookFields and Fields.hooks
const (
	hookFallbacks = iota
	hookMockFallbacks
	hookMockRateLimit
	hookMockTimeout
	hookTimeout
)

// timeoutHeader is x-litellm-timeout, canonical (req.Header is indexed directly).
const timeoutHeader = "X-Litellm-Timeout"

// hooks are a request's hook settings.
type hooks struct {
	fallbacks                              []string // nil: the request sent none
	mockFallbacks, mockRateLimit, mockWait bool
	fallbackList                           string        // the fallbacks for the mock message
	timeout                                time.Duration // x-litellm-timeout; 0: none
	timeoutHdr                             []string      // its x-litellm-timeout answer
	bodyTimeout                            time.Duration // the body's "timeout" (mock_timeout)
}

// readHooks reads the hooks of a request and returns the body without the members LiteLLM
// removes (fallbacks and the mock flags; "timeout" stays, as before).
func (p *Pipeline) readHooks(ctx context.Context, spec Spec, rf *Fields) (hooks, []byte, error) {
	var hk hooks
	body := spec.Body
	if v := spec.ReqHeader[timeoutHeader]; len(v) > 0 {
		t, err := positiveSeconds(v[0])
		if err != nil {
			return hk, nil, invalid("x-litellm-timeout", "x-litellm-timeout: must be a number of seconds > 0, got %q", v[0])
		}
		hk.timeout, hk.timeoutHdr = t, []string{router.Seconds(t)}
	}
	if !rf.anyHook {
		return hk, body, nil
	}
	flag := func(i int) (bool, error) {
		r := rf.hooks[i]
		switch r.Type {
		case gjson.True:
			return true, nil
		case gjson.False, gjson.Null:
			return false, nil
		}
		if !r.Exists() {
			return false, nil
		}
		return false, invalid(hookFields[i], "%s: must be a boolean, got %s", hookFields[i], r.Raw)
	}
	var err error
	if hk.mockFallbacks, err = flag(hookMockFallbacks); err != nil {
		return hk, nil, err
	}
	if hk.mockRateLimit, err = flag(hookMockRateLimit); err != nil {
		return hk, nil, err
	}
	if hk.mockWait, err = flag(hookMockTimeout); err != nil {
		return hk, nil, err
	}
	if r := rf.hooks[hookTimeout]; hk.mockWait && r.Exists() && r.Type != gjson.Null { // read for mock_timeout only
		t, err := positiveSeconds(r.Raw)
		if r.Type != gjson.Number || err != nil {
			return hk, nil, invalid("timeout", "timeout: must be a number of seconds > 0, got %s", r.Raw)
		}
		hk.bodyTimeout = t
	}
	if hk.fallbacks, err = p.requestFallbacks(ctx, spec.Caller, rf.hooks[hookFallbacks]); err != nil {
		return hk, nil, err
	}
	hk.fallbackList = pyRepr(hk.fallbacks, p.Router.Settings().Fallbacks)
	for i := hookFallbacks; i <= hookMockTimeout; i++ {
		if rf.hooks[i].Exists() {
			if body, err = sjson.DeleteBytes(body, hookFields[i]); err != nil {
				return hk, nil, invalid(hookFields[i], "%s: %v", hookFields[i], err)
			}
		}
	}
	return hk, body, nil
}

// positiveSeconds parses a number of seconds > 0 (finite).
func positiveSeconds(v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > math.MaxInt64/float64(time.Second) {
		return 0, fmt.Errorf("not a number of seconds > 0: %q", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// mock returns the failure the hooks raise instead of routing the call to model (tried: the
// fallbacks called before it); nil when none applies.
func (hk hooks) mock(model string, tried int) func(ctx context.Context, c *Call) error {
	switch {
	case hk.mockRateLimit:
		return func(context.Context, *Call) error {
			return mockError(router.ClassRateLimit, 429, "rate_limit_error",
				"litellm.RateLimitError: This is a mock exception for model="+model+", to trigger a rate limit error.")
		}
	case hk.mockFallbacks && tried == 0:
		list := hk.fallbackList
		return func(context.Context, *Call) error {
			return mockError(router.ClassInternalServer, 500, "internal_server_error",
				"litellm.InternalServerError: This is a mock exception for model="+model+", to trigger a fallback. Fallbacks="+list)
		}
	case hk.mockWait:
		wait := hk.timeout
		if wait == 0 {
			wait = hk.bodyTimeout
		}
		return func(ctx context.Context, c *Call) error {
			w := wait
			if w == 0 {
				w = provider.DefaultTimeout
				if len(c.target.group) > 0 {
					w = c.target.group[0].Value.Timeout
				}
			}
			t := time.NewTimer(w)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
			return mockError(router.ClassTimeout, 408, "timeout", "litellm.Timeout: This is a mock timeout error")
		}
	}
	return nil
}

// mockError is a hook's failure as the router reports a failed call (no deployment called).
func mockError(c router.Class, status int, typ, msg string) error {
	return &router.Error{Class: c, Err: &format.UpstreamError{Status: status, Type: typ, Message: msg}}
}
