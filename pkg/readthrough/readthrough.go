// Package readthrough is the bounded read-through primitive: when a request names an object
// the registry lacks, fetch that one object from Postgres, load it, and let the caller retry.
//
// Bounds (the shape of Consul's agent/cache): one fetch in flight per key (concurrent misses
// coalesce, golang.org/x/sync/singleflight), a negative cache (default 2 s) for names the DB
// does not have either, and a per-registry budget (default 20 fetches per 5 s, a token bucket
// from golang.org/x/time/rate) that fails closed: over budget, or on a DB error, the miss
// stands and is NOT negative-cached, so a flood of unknown names can never become a DB hot
// loop and a transient error never hides an object for the TTL.
package readthrough

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// Options bounds a Group. Zero fields take the defaults.
type Options struct {
	// NegativeTTL is how long a not-found answer is remembered. Default 2 s.
	NegativeTTL time.Duration
	// Budget is how many fetches may start per BudgetWindow. Default 20 (0 takes the
	// default); negative: no fetch ever starts (every miss fails closed, so the change feed's
	// barrier alone decides it — a test and operations knob, GATEWAY_READ_THROUGH_BUDGET=0).
	Budget int
	// BudgetWindow is the window Budget refills over. Default 5 s.
	BudgetWindow time.Duration
	// Timeout bounds one fetch. Default 2 s.
	Timeout time.Duration
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.NegativeTTL == 0 {
		o.NegativeTTL = 2 * time.Second
	}
	if o.Budget == 0 {
		o.Budget = 20
	}
	if o.BudgetWindow == 0 {
		o.BudgetWindow = 5 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Fetch loads key from the source of truth into the registry. It returns found=false (and
// nil) when the source does not have it, and an error when it could not tell.
type Fetch func(ctx context.Context, key string) (found bool, err error)

// Result is the outcome of one Do.
type Result struct {
	Found           bool  // the fetch found and loaded the key; look it up again
	NegativeHit     bool  // answered from the negative cache, no fetch
	BudgetExhausted bool  // failed closed: no fetch was made
	Err             error // the fetch failed; the miss stands, not cached
	Shared          bool  // coalesced onto another caller's in-flight fetch
}

// Stats are the counters /sync/lag reports per registry.
type Stats struct {
	Attempts        int64 `json:"attempts"`         // misses that reached Do
	Found           int64 `json:"found"`            // fetches that found the key
	NotFound        int64 `json:"not_found"`        // fetches that did not (then negative-cached)
	NegativeHits    int64 `json:"negative_hits"`    // misses answered by the negative cache
	BudgetExhausted int64 `json:"budget_exhausted"` // misses refused by the budget
	Errors          int64 `json:"errors"`           // fetches that failed
	Fetches         int64 `json:"-"`                // DB fetches actually made
}

// Group runs bounded read-throughs for one registry. Safe for concurrent use.
type Group struct {
	fetch Fetch
	opts  Options
	sf    singleflight.Group
	lim   *rate.Limiter

	mu  sync.Mutex
	neg map[string]time.Time // key → expiry
	// inflight marks keys with a fetch running; Forget sets the mark, and a marked fetch
	// does not store its not-found answer (the key was loaded while the fetch read an older
	// state of the database).
	inflight map[string]bool

	attempts, found, notFound, negHits, budget, errs, fetches atomic.Int64
}

// New builds a Group around fetch.
func New(fetch Fetch, opts Options) *Group {
	opts.defaults()
	lim := rate.NewLimiter(0, 0) // negative budget: never allows
	if opts.Budget > 0 {
		lim = rate.NewLimiter(rate.Every(opts.BudgetWindow/time.Duration(opts.Budget)), opts.Budget)
	}
	return &Group{fetch: fetch, opts: opts, lim: lim, neg: map[string]time.Time{}, inflight: map[string]bool{}}
}

// Do resolves a miss on key. Concurrent calls for one key share a single fetch (and a single
// budget token).
func (g *Group) Do(ctx context.Context, key string) Result {
	g.attempts.Add(1)
	now := g.opts.Now()
	g.mu.Lock()
	if exp, ok := g.neg[key]; ok {
		if now.Before(exp) {
			g.mu.Unlock()
			g.negHits.Add(1)
			return Result{NegativeHit: true}
		}
		delete(g.neg, key)
	}
	g.mu.Unlock()

	v, _, shared := g.sf.Do(key, func() (any, error) {
		if !g.lim.AllowN(g.opts.Now(), 1) {
			g.budget.Add(1)
			return Result{BudgetExhausted: true}, nil
		}
		g.fetches.Add(1)
		g.mu.Lock()
		g.inflight[key] = false
		g.mu.Unlock()
		defer func() { g.mu.Lock(); delete(g.inflight, key); g.mu.Unlock() }()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.Timeout)
		defer cancel()
		found, err := g.fetch(fctx, key)
		switch {
		case err != nil:
			g.errs.Add(1)
			return Result{Err: err}, nil
		case found:
			g.found.Add(1)
			return Result{Found: true}, nil
		default:
			g.notFound.Add(1)
			g.mu.Lock()
			if len(g.neg) > 10000 {
				g.sweep(g.opts.Now())
			}
			if !g.inflight[key] { // not loaded by someone else meanwhile
				g.neg[key] = g.opts.Now().Add(g.opts.NegativeTTL)
			}
			g.mu.Unlock()
			return Result{}, nil
		}
	})
	r := v.(Result)
	r.Shared = shared
	return r
}

// Forget drops keys from the negative cache (the registry just loaded them), and keeps a
// fetch of one of them that is in flight from caching its not-found answer.
func (g *Group) Forget(keys ...string) {
	if len(keys) == 0 {
		return
	}
	g.mu.Lock()
	for _, k := range keys {
		delete(g.neg, k)
		if _, ok := g.inflight[k]; ok {
			g.inflight[k] = true
		}
	}
	g.mu.Unlock()
}

func (g *Group) sweep(now time.Time) {
	for k, exp := range g.neg {
		if !now.Before(exp) {
			delete(g.neg, k)
		}
	}
}

// Stats returns a copy of the counters.
func (g *Group) Stats() Stats {
	return Stats{
		Attempts: g.attempts.Load(), Found: g.found.Load(), NotFound: g.notFound.Load(),
		NegativeHits: g.negHits.Load(), BudgetExhausted: g.budget.Load(), Errors: g.errs.Load(),
		Fetches: g.fetches.Load(),
	}
}
