package call

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"lockstep/pkg/provider"
	"lockstep/pkg/router"
	"lockstep/pkg/spend"
)

// Response headers as LiteLLM sends them (API.md "Compatibility policy"; LiteLLM
// litellm/proxy/common_request_processing.py get_custom_headers, router_utils/
// add_retry_fallback_headers.py), on every answer of an LLM route, plain and streamed:
//
//   - x-litellm-call-id: the call's id, the spend log's call_id (its request_id when the answer has
//     no id of its own, as a failed call);
//   - x-litellm-model-id: the model_id of the deployment that answered;
//   - x-litellm-model-region: its litellm_params.region_name (only when it has one);
//   - x-litellm-response-cost: the call's cost in USD, as Python prints a float ("0.0",
//     "1.5e-05"); not on a stream (the cost is known only at its end: LiteLLM leaves out a
//     None value);
//   - x-litellm-attempted-retries: upstream calls made minus one;
//   - x-litellm-max-retries: the caller's router_settings.num_retries (its key's, else its
//     team's), else the config's router_settings.num_retries;
//   - x-litellm-timeout: the request's x-litellm-timeout, else the caller's
//     router_settings.timeout, else the deployment's timeout, in seconds;
//   - x-litellm-attempted-fallbacks: how many fallback model groups were called before the
//     one answering (Serve, fallbacks.go);
//   - x-litellm-applied-policies: the guardrail policies the call applied, joined by ","
//     (policies.go; only when it applied one);
//   - x-litellm-policy-sources: why each attached policy applied, "<policy>=<matched_via>"
//     joined by "; " (only when an attached policy applied).
//
// The same headers but the cost go on an error answer of a call that was admitted (res nil;
// Serve returns that call). Values are assigned under their canonical keys; all but the call id and the cost are shared
// one-value slices built once (router.Headers, smallInts), so no canonicalisation and few
// allocations per call.
func (c *Call) SetHeaders(h http.Header, res *provider.Response) {
	h["X-Litellm-Call-Id"] = c.idHeader
	h["X-Litellm-Attempted-Retries"] = smallInt(c.attempts - 1)
	if c.rs != nil && c.rs.HasNumRetries {
		h["X-Litellm-Max-Retries"] = smallInt(c.rs.NumRetries)
	} else {
		h["X-Litellm-Max-Retries"] = smallInt(c.p.Router.Settings().NumRetries)
	}
	h["X-Litellm-Attempted-Fallbacks"] = smallInt(c.fallbacks)
	if c.timeout != nil {
		h["X-Litellm-Timeout"] = c.timeout
	}
	c.applied.policyHeaders(h)
	d := c.d
	if d == nil || d.Headers == nil {
		return
	}
	h["X-Litellm-Model-Id"] = d.Headers.ModelID
	if d.Headers.Region != nil {
		h["X-Litellm-Model-Region"] = d.Headers.Region
	}
	if c.timeout == nil {
		h["X-Litellm-Timeout"] = d.Headers.Timeout
	}
	if res != nil {
		if cost := spend.Cost(d.ModelInfo, res.Usage.PromptTokens, res.Usage.CompletionTokens); cost != 0 {
			h["X-Litellm-Response-Cost"] = []string{pyFloat(cost)}
		} else {
			h["X-Litellm-Response-Cost"] = zeroCost
		}
	}
}

// zeroCost is the x-litellm-response-cost of an unpriced call (shared, cap 1).
var zeroCost = []string{"0.0"}

// IDs makes call ids: unique across replicas and restarts (a prefix naming the replica and
// its start, then a sequence number in base 36). Make it with NewIDs; safe for concurrent use.
type IDs struct {
	prefix string
	seq    atomic.Int64
}

// NewIDs returns the id maker of replica (its start time makes ids unique across restarts).
func NewIDs(replica string) *IDs {
	return &IDs{prefix: fmt.Sprintf("%s-%s-", replica, strconv.FormatInt(time.Now().UnixNano(), 36))}
}

// Next returns a new id (a spend log's request_id).
func (ids *IDs) Next() string {
	n := ids.seq.Add(1)
	return ids.prefix + strconv.FormatInt(n, 36)
}

// newCallID returns a call id (Next's form) and its one-value header slice, in one
// allocation.
func (ids *IDs) newCallID() (string, []string) {
	b := &struct {
		v   [1]string
		buf [64]byte
	}{}
	out := append(b.buf[:0], ids.prefix...)
	out = strconv.AppendInt(out, ids.seq.Add(1), 36)
	if len(out) > len(b.buf) { // a prefix longer than the buffer: append moved it
		id := string(out)
		return id, []string{id}
	}
	b.v[0] = unsafe.String(&b.buf[0], len(out))
	return b.v[0], b.v[:]
}

// smallInts are the one-value header slices of 0…31 (cap 1, shared).
var smallInts = func() [32][]string {
	var a [32][]string
	for i := range a {
		a[i] = []string{strconv.Itoa(i)}
	}
	return a
}()

func smallInt(n int) []string {
	if n < 0 {
		n = 0
	}
	if n < len(smallInts) {
		return smallInts[n]
	}
	return []string{strconv.Itoa(n)}
}

// pyFloat formats f as Python's str(float): the shortest repr, exponent form below 1e-4 and
// from 1e16, always with a "." or an exponent ("0.0", "2.0", "0.00015", "1.5e-05").
func pyFloat(f float64) string {
	if f == 0 {
		return "0.0"
	}
	if a := math.Abs(f); a < 1e-4 || a >= 1e16 {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if strings.IndexByte(s, '.') < 0 {
		s += ".0"
	}
	return s
}

// routerHeaders keeps the caller's router_settings (Caller.RouterSettings) for the call's
// x-litellm-max-retries and, when the request set none, its x-litellm-timeout.
func (c *Call) routerHeaders(rs *router.CallerSettings) {
	c.rs = rs
	if rs.Timeout > 0 && c.timeout == nil {
		c.timeout = []string{strconv.FormatFloat(rs.Timeout.Seconds(), 'f', -1, 64)}
	}
}
