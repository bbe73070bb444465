package router

import (
	"context"
	"lockstep/pkg/format"
	"math"
	"math/rand/v2"
	"time"

	"lockstep/pkg/limits"
	"lockstep/pkg/registry"
)

// cand is a deployment that may take the call.
type cand struct {
	d  *Deployment
	st *depState
}

// picked is the deployment chosen for one attempt and what it holds until the call ends.
type picked struct {
	d      *Deployment
	st     *depState
	ticket limits.Ticket
	capped bool // ticket holds caps (Done it)
}

// release ends the attempt's hold on the deployment: its in-flight slot and, with caps, the
// tokens the upstream reported.
func (p *picked) release(tokens int64) {
	p.st.inflight.Add(-1)
	if p.capped {
		p.ticket.Done(tokens)
		if tokens > 0 && p.d != nil {
			p.st.usedTokens.Add(tokens)
		}
	}
}

// pick chooses the deployment for one attempt (LiteLLM Router.async_get_available_deployment):
// the deployments that can serve format in, not cooling down, under max_parallel_requests,
// not tried yet by this call when others remain; of those the lowest order tier; within the
// tier the strategy's choice, skipping any at its rpm/tpm cap (the next tier when the whole
// tier is capped). Returns a *NoDeploymentsError when nothing can take the call.
func (r *Router) pick(ctx context.Context, group []*registry.Entry[*Deployment], tried []string, in format.Format, stream bool) (picked, error) {
	var buf [16]cand
	all := buf[:0]
	now := time.Now().UnixNano()
	var cooling []string
	var retryAfter time.Duration
	supported := false
	for _, e := range group {
		d := e.Value
		if !d.Supports(in) {
			continue
		}
		supported = true
		st := r.state(d.ModelID)
		if st.cooling(now) {
			cooling = append(cooling, d.ModelID)
			if ra := time.Duration(st.coolUntil.Load() - now); retryAfter == 0 || ra < retryAfter {
				retryAfter = ra
			}
			continue
		}
		all = append(all, cand{d, st})
	}
	if !supported {
		d := group[0].Value
		return picked{}, &format.UpstreamError{Status: 400, Message: in.RouteName() + " not supported by provider " + d.Provider}
	}
	// untried first; a retry may go back to a tried deployment when nothing else is left
	// (LiteLLM retries the same deployment of a one-deployment group)
	if len(tried) > 0 {
		n := 0
		for _, c := range all {
			if !contains(tried, c.d.ModelID) {
				all[n], n = c, n+1
			}
		}
		if n > 0 {
			all = all[:n]
		}
	}
	var capped []string
	var tbuf [16]cand
	for len(all) > 0 {
		tier := orderTier(all, tbuf[:0])
		for len(tier) > 0 {
			i := r.choose(tier, stream)
			c := tier[i]
			p, ok, why, ra := r.take(ctx, c)
			if ok {
				r.routed.Add(1)
				return p, nil
			}
			capped = append(capped, c.d.ModelID+": "+why)
			if ra > 0 && (retryAfter == 0 || ra < retryAfter) {
				retryAfter = ra
			}
			tier[i] = tier[len(tier)-1]
			tier = tier[:len(tier)-1]
			all = removeID(all, c.d.ModelID)
		}
	}
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	r.noDeployments.Add(1)
	return picked{}, &NoDeploymentsError{Model: group[0].Value.ModelName, RetryAfter: retryAfter, CooldownList: cooling, Capped: capped}
}

// take holds c for one call: a max_parallel_requests slot on this replica, then its caps.
func (r *Router) take(ctx context.Context, c cand) (picked, bool, string, time.Duration) {
	if m := c.d.Routing.MaxParallel; m > 0 {
		for {
			n := c.st.inflight.Load()
			if n >= m {
				return picked{}, false, limits.KindParallel, 0
			}
			if c.st.inflight.CompareAndSwap(n, n+1) {
				break
			}
		}
	} else {
		c.st.inflight.Add(1)
	}
	p := picked{d: c.d, st: c.st}
	if r.tracked(c.d) {
		t, ok, why, ra := r.admit(ctx, c.d, c.st)
		if !ok {
			c.st.inflight.Add(-1)
			return picked{}, false, why, ra
		}
		p.ticket, p.capped = t, true
	}
	return p, true, "", 0
}

// orderTier returns the candidates of the lowest order (litellm_params.order); those without
// an order come after every ordered one, appended to tier (a copy the caller may reorder).
func orderTier(all, tier []cand) []cand {
	low := math.MaxInt
	for _, c := range all {
		if o := c.d.Routing.Order; o > 0 && o < low {
			low = o
		}
	}
	for _, c := range all {
		o := c.d.Routing.Order
		if o == low || (low == math.MaxInt && o == 0) {
			tier = append(tier, c)
		}
	}
	return tier
}

func removeID(all []cand, id string) []cand {
	for i, c := range all {
		if c.d.ModelID == id {
			return append(all[:i], all[i+1:]...)
		}
	}
	return all
}

// choose returns the index in cands (non-empty) of the strategy's choice.
func (r *Router) choose(cands []cand, stream bool) int {
	if len(cands) == 1 {
		return 0
	}
	switch r.settings.RoutingStrategy {
	case LeastBusy:
		return lowest(cands, func(c cand) float64 { return float64(c.st.inflight.Load()) })
	case LatencyBased:
		return r.lowestLatency(cands, stream)
	case UsageBasedV2:
		return lowest(cands, func(c cand) float64 { return float64(r.usage(c.st)) })
	case CostBased:
		return lowest(cands, func(c cand) float64 { return c.d.Routing.Cost })
	}
	return shuffle(cands)
}

// lowest is the index of the candidate with the lowest measure, ties broken at random.
func lowest(cands []cand, measure func(cand) float64) int {
	n := len(cands)
	start := rand.IntN(n)
	best, bestV := start, measure(cands[start])
	for i := 1; i < n; i++ {
		j := (start + i) % n
		if v := measure(cands[j]); v < bestV {
			best, bestV = j, v
		}
	}
	return best
}

// shuffle is simple-shuffle (LiteLLM router_strategy/simple_shuffle.py): weighted by
// litellm_params.weight when any deployment of the tier sets one (unset = 0), else by rpm,
// else by tpm, else uniform.
func shuffle(cands []cand) int {
	weight := func(c cand) float64 { return c.d.Routing.Weight }
	switch {
	case anyOf(cands, func(c cand) bool { return c.d.Routing.Weight > 0 }):
	case anyOf(cands, func(c cand) bool { return c.d.RPM > 0 }):
		weight = func(c cand) float64 { return float64(c.d.RPM) }
	case anyOf(cands, func(c cand) bool { return c.d.TPM > 0 }):
		weight = func(c cand) float64 { return float64(c.d.TPM) }
	default:
		return rand.IntN(len(cands))
	}
	total := 0.0
	for _, c := range cands {
		total += weight(c)
	}
	if total <= 0 {
		return rand.IntN(len(cands))
	}
	x := rand.Float64() * total
	for i, c := range cands {
		if x -= weight(c); x < 0 {
			return i
		}
	}
	return len(cands) - 1
}

func anyOf(cands []cand, f func(cand) bool) bool {
	for _, c := range cands {
		if f(c) {
			return true
		}
	}
	return false
}

// lowestLatency is latency-based-routing (LiteLLM router_strategy/lowest_latency.py): the
// average of each deployment's recent samples (streamed calls: time to open the stream;
// others: seconds per completion token), 0 for one without samples younger than ttl (so it
// is tried); picked at random among those within lowest × (1 + lowest_latency_buffer).
func (r *Router) lowestLatency(cands []cand, stream bool) int {
	k := 0
	if stream {
		k = 1
	}
	now := time.Now().UnixNano()
	ttl := int64(r.settings.LatencyTTL)
	var vbuf [16]float64
	vals := vbuf[:0]
	low := math.Inf(1)
	for _, c := range cands {
		l := &c.st.lat[k]
		v := 0.0
		if now-l.last.Load() <= ttl {
			v = math.Float64frombits(l.avg.Load())
		}
		vals = append(vals, v)
		low = min(low, v)
	}
	limit := low * (1 + r.settings.LowestLatencyBuffer)
	n := 0
	for _, v := range vals {
		if v <= limit {
			n++
		}
	}
	x := rand.IntN(n)
	for i, v := range vals {
		if v <= limit {
			if x == 0 {
				return i
			}
			x--
		}
	}
	return 0
}

// record adds one latency sample (seconds) at now and refreshes the average of the samples
// younger than ttl, keeping at most size.
func (l *latency) record(v float64, now int64, ttl time.Duration, size int) {
	l.mu.Lock()
	if len(l.vals) < size {
		l.vals = append(l.vals, v)
		l.at = append(l.at, now)
	} else {
		l.vals[l.next%len(l.vals)], l.at[l.next%len(l.vals)] = v, now
	}
	l.next++
	sum, n := 0.0, 0
	for i, x := range l.vals {
		if now-l.at[i] <= int64(ttl) {
			sum, n = sum+x, n+1
		}
	}
	l.avg.Store(math.Float64bits(sum / float64(max(n, 1))))
	l.last.Store(now)
	l.mu.Unlock()
}
