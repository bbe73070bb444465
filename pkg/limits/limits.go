// Package limits enforces a virtual key's rpm_limit, tpm_limit and max_parallel_requests across
// every replica together, with Postgres as the only shared component (DESIGN.md "Cluster-wide
// limits by leases"; API.md "Keys (admin) and their limits").
//
// Windows (rpm, tpm): a key's limit for the current fixed window on the database clock lives in
// one row (gateway.rate_windows). A replica leases a few units from it with one conditional
// statement (store.LeaseWindow) and admits locally from its lease, with no database round trip
// and no global lock (one small mutex per key and kind); it takes the next lease before it runs
// out (asynchronously, one lease in flight per key and kind). The sum of leases never exceeds the
// limit, so the cluster never admits more than the limit in a window; what replicas hold unused
// when the window ends is the under-admission, at most replicas × lease size. The lease size
// follows the observed rate (about one second of traffic) and is capped at limit/16 (at least 1),
// so rpm_limit 1 leases exactly one unit.
//
// tpm_limit leases tokens the same way: a call is admitted while this replica's token lease is
// positive and the tokens the upstream reports are debited after the call (the lease may go
// negative; the debt is leased back before the next admission), so the cluster overshoots the
// limit by at most the tokens of the calls in flight when it is reached.
//
// max_parallel_requests leases slots per key and replica (gateway.slot_leases, serialised per key
// in the database); a slot is used for the duration of a call and spare slots go back after it
// ends. Slot leases carry an expiry renewed every SlotTTL/3 by one statement per replica, so the
// slots of a dead replica free themselves within SlotTTL.
//
// With the database unreachable a limited key keeps admitting what its replica holds (units of
// the current window, slots until their lease expires), then is refused with an
// *UnavailableError (fail closed for limited keys only; keys without limits never reach this
// package).
package limits

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"lockstep/pkg/store"
)

// Store is what the limiter needs from Postgres (implemented by *store.Store).
type Store interface {
	LeaseWindow(ctx context.Context, token, kind string, limit, want int64, window time.Duration) (store.WindowGrant, error)
	LeaseSlots(ctx context.Context, token, replica string, want, max int, ttl time.Duration) (int, error)
	RenewSlots(ctx context.Context, replica string, ttl time.Duration) error
	PruneLimits(ctx context.Context, keep time.Duration) error
}

var _ Store = (*store.Store)(nil)

// Limits are a key's limits; the zero value has none. A limit counts only when its Has flag is
// set (a limit of 0 admits nothing).
type Limits struct {
	RPM      int64 // requests per window
	TPM      int64 // tokens per window (upstream-reported total tokens)
	Parallel int64 // requests in flight at once

	HasRPM, HasTPM, HasParallel bool
}

// Any reports whether any limit is set.
func (l Limits) Any() bool { return l.HasRPM || l.HasTPM || l.HasParallel }

// Limit kinds, as LiteLLM names them in its 429 message ("Limit type: ...").
const (
	KindRequests = "requests"
	KindTokens   = "tokens"
	KindParallel = "max_parallel_requests"
)

// LimitError is a request refused because a limit is reached (HTTP 429).
type LimitError struct {
	Kind       string    // KindRequests, KindTokens or KindParallel
	Limit      int64     // the limit in force
	ResetAt    time.Time // when the window turns (local clock); zero for KindParallel
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s limit %d reached", e.Kind, e.Limit)
}

// UnavailableError is a limited key refused because its replica holds no more units and the
// database cannot be reached to lease more (HTTP 503).
type UnavailableError struct {
	Kind string
	Err  error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("the %s limit of this key is held in Postgres, which is unreachable, and this replica has used up what it had leased: %v", e.Kind, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Config configures a Limiter; zero fields take the documented defaults.
type Config struct {
	Store     Store
	ReplicaID string
	// Window is the length of the fixed rate-limit windows on the database clock. Default one
	// minute (LiteLLM's rpm/tpm); shorter only as a test knob (GATEWAY_LIMIT_WINDOW).
	Window time.Duration
	// SlotTTL is how long a parallel-slot lease lives without renewal (a dead replica's slots
	// are free again after it). Default 10 s; test knob GATEWAY_LIMIT_SLOT_TTL.
	SlotTTL time.Duration
	// LeaseTimeout bounds one lease round trip. Default 2 s.
	LeaseTimeout time.Duration
	Log          zerolog.Logger
}

// Stats are the limiter's counters since start.
type Stats struct {
	Admitted    int64            // requests admitted for keys with limits
	Rejected    map[string]int64 // by reason: requests, tokens, max_parallel_requests, db_unavailable
	RoundTrips  map[string]int64 // lease round trips by kind: rpm, tpm, slots (renewals included)
	LeaseErrors int64
}

// Limiter admits requests of limited keys. Safe for concurrent use.
type Limiter struct {
	cfg   Config
	keys  sync.Map // token → *keyState
	clock func() time.Time

	admitted                         atomic.Int64
	rejRPM, rejTPM, rejPar, rejDB    atomic.Int64
	rtRPM, rtTPM, rtSlots, leaseErrs atomic.Int64
	stopOnce                         sync.Once
	stop                             chan struct{}
	done                             chan struct{}
	started                          atomic.Bool
}

// New builds a Limiter; Start runs its background renewal.
func New(cfg Config) *Limiter {
	if cfg.Window <= 0 {
		cfg.Window = time.Minute
	}
	if cfg.SlotTTL <= 0 {
		cfg.SlotTTL = 10 * time.Second
	}
	if cfg.LeaseTimeout <= 0 {
		cfg.LeaseTimeout = 2 * time.Second
	}
	return &Limiter{cfg: cfg, clock: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
}

// Window returns the window length in force.
func (l *Limiter) Window() time.Duration { return l.cfg.Window }

// Start runs the slot-lease renewal (every SlotTTL/3) and the pruning of old windows until Stop.
func (l *Limiter) Start(ctx context.Context) error {
	l.started.Store(true)
	go l.background(ctx)
	return nil
}

// Stop ends the background work and gives back the slots this replica holds unused. Idempotent,
// blocking.
func (l *Limiter) Stop() {
	l.stopOnce.Do(func() {
		close(l.stop)
		if l.started.Load() {
			<-l.done
		}
		l.giveBackSlots()
	})
}

func (l *Limiter) background(ctx context.Context) {
	defer close(l.done)
	tick := time.NewTicker(l.cfg.SlotTTL / 3)
	defer tick.Stop()
	lastPrune := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-tick.C:
		}
		l.renewSlots(ctx)
		if time.Since(lastPrune) > 5*time.Minute {
			lastPrune = time.Now()
			pctx, cancel := context.WithTimeout(ctx, l.cfg.LeaseTimeout)
			if err := l.cfg.Store.PruneLimits(pctx, max(time.Hour, 10*l.cfg.Window)); err != nil {
				l.cfg.Log.Debug().Err(err).Msg("prune rate-limit windows")
			}
			cancel()
		}
	}
}

// Stats returns the counters.
func (l *Limiter) Stats() Stats {
	return Stats{
		Admitted:    l.admitted.Load(),
		Rejected:    map[string]int64{KindRequests: l.rejRPM.Load(), KindTokens: l.rejTPM.Load(), KindParallel: l.rejPar.Load(), "db_unavailable": l.rejDB.Load()},
		RoundTrips:  map[string]int64{"rpm": l.rtRPM.Load(), "tpm": l.rtTPM.Load(), "slots": l.rtSlots.Load()},
		LeaseErrors: l.leaseErrs.Load(),
	}
}

type keyState struct {
	token string
	rpm   window
	tpm   window
	slots slots
}

func (l *Limiter) state(token string) *keyState {
	if v, ok := l.keys.Load(token); ok {
		return v.(*keyState)
	}
	ks := &keyState{token: token}
	ks.rpm.kind, ks.tpm.kind = "rpm", "tpm"
	v, _ := l.keys.LoadOrStore(token, ks)
	return v.(*keyState)
}

// Ticket is an admitted request; Done must be called once when it ends.
type Ticket struct {
	ks       *keyState
	l        *Limiter
	lim      Limits
	reserved int64 // tokens reserved at admission (tpm), settled by Done
	// remaining requests and tokens at admission (see Status)
	remRPM, remTPM int64
}

// Status is what the rate-limit response headers report.
type Status struct {
	LimitRequests, RemainingRequests int64 // LimitRequests < 0: no rpm_limit
	LimitTokens, RemainingTokens     int64 // LimitTokens < 0: no tpm_limit
}

func orNone(v int64, has bool) int64 {
	if !has {
		return -1
	}
	return v
}

// Admit admits one request of the key with token under lim, or returns a *LimitError (429)
// or an *UnavailableError (503). It takes no database round trip while this replica's leases
// cover the request. lim must have a limit (Limits.Any).
func (l *Limiter) Admit(ctx context.Context, token string, lim Limits) (Ticket, error) {
	ks := l.state(token)
	t := Ticket{ks: ks, l: l, lim: lim}
	if lim.HasRPM {
		var err error
		if t.remRPM, err = l.takeWindow(ctx, ks, &ks.rpm, lim.RPM, 1, KindRequests); err != nil {
			return Ticket{}, l.count(err)
		}
	}
	if lim.HasTPM {
		t.reserved = ks.tpm.estimate(lim.TPM)
		var err error
		if t.remTPM, err = l.takeWindow(ctx, ks, &ks.tpm, lim.TPM, t.reserved, KindTokens); err != nil {
			if lim.HasRPM {
				ks.rpm.giveBack(1)
			}
			return Ticket{}, l.count(err)
		}
	}
	if lim.HasParallel {
		if err := l.takeSlot(ctx, ks, int(lim.Parallel)); err != nil {
			if lim.HasRPM {
				ks.rpm.giveBack(1)
			}
			if lim.HasTPM {
				ks.tpm.giveBack(t.reserved)
			}
			return Ticket{}, l.count(err)
		}
	}
	l.admitted.Add(1)
	return t, nil
}

func (l *Limiter) count(err error) error {
	var le *LimitError
	switch {
	case errors.As(err, &le):
		switch le.Kind {
		case KindRequests:
			l.rejRPM.Add(1)
		case KindTokens:
			l.rejTPM.Add(1)
		default:
			l.rejPar.Add(1)
		}
	default:
		l.rejDB.Add(1)
	}
	return err
}

// Done ends an admitted request: tokens (the upstream-reported total, 0 when unknown) are
// debited from the key's token lease, and its parallel slot is freed.
func (t Ticket) Done(tokens int64) {
	if t.ks == nil {
		return
	}
	if t.lim.HasTPM {
		t.l.debit(t.ks, t.lim.TPM, tokens, t.reserved)
	}
	if t.lim.HasParallel {
		t.l.freeSlot(t.ks, int(t.lim.Parallel))
	}
}

// Status reports the key's limits and an estimate of what remains in the current window
// cluster-wide (the limit minus what every replica leased, plus what this replica holds).
func (t Ticket) Status() Status {
	return Status{LimitRequests: orNone(t.lim.RPM, t.lim.HasRPM), RemainingRequests: t.remRPM,
		LimitTokens: orNone(t.lim.TPM, t.lim.HasTPM), RemainingTokens: t.remTPM}
}

// Status is Ticket.Status for a key by token (also for a refused request).
func (l *Limiter) Status(token string, lim Limits) Status {
	st := Status{LimitRequests: orNone(lim.RPM, lim.HasRPM), LimitTokens: orNone(lim.TPM, lim.HasTPM)}
	v, ok := l.keys.Load(token)
	if !ok {
		st.RemainingRequests, st.RemainingTokens = lim.RPM, lim.TPM
		return st
	}
	ks := v.(*keyState)
	now := l.clock()
	if lim.HasRPM {
		st.RemainingRequests = ks.rpm.remaining(now, lim.RPM)
	}
	if lim.HasTPM {
		st.RemainingTokens = ks.tpm.remaining(now, lim.TPM)
	}
	return st
}

// --- windows (rpm, tpm) ------------------------------------------------------------------

// window is this replica's lease on one key's window row of one kind.
type window struct {
	kind string
	mu   sync.Mutex
	// have: units held unused (tpm: may be negative, the debt of tokens reported beyond the lease)
	have     int64
	start    time.Time // window start, database clock
	end      time.Time // window end, local clock (conservative)
	used     int64     // units leased cluster-wide as of the last grant
	limit    int64     // the limit of the last lease; a change forfeits have and re-leases
	leased   bool      // have/used belong to the window [.., end)
	exhaust  bool      // the database said the window is used up (at limit)
	inflight chan struct{}
	lastErr  error
	errAt    time.Time
	// rate estimation: units taken since the last lease started, and when it started
	sinceLease int64
	leaseAt    time.Time
	size       int64
	perCall    float64 // tpm: average tokens per call (EWMA), for the reservation at admission
}

// errRetryWindow is how long after a failed lease admissions that need one fail at once,
// instead of each trying the database again.
const errRetryWindow = 500 * time.Millisecond

func (w *window) roll(now time.Time, limit int64) {
	if w.leased && !now.Before(w.end) {
		w.leased, w.have, w.used, w.exhaust = false, 0, 0, false
	}
	if w.leased && limit != w.limit {
		// the key's limit changed: what this replica holds was leased under the old limit;
		// forfeit it and lease again under the new one (applies at this very call)
		if w.have > 0 {
			w.have = 0
		}
		w.exhaust = false
		w.limit = limit
		w.leased = false
	}
}

func (w *window) remaining(now time.Time, limit int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.leased || !now.Before(w.end) {
		return max(limit, 0)
	}
	return max(0, limit-w.used+max(w.have, 0))
}

func (w *window) giveBack(n int64) {
	w.mu.Lock()
	if w.leased {
		w.have += n
	}
	w.mu.Unlock()
}

// takeWindow admits one request against a window by taking units from this replica's lease:
// one request (rpm), or the tokens a call is estimated to use (tpm; settled after the call).
// It returns what remains in the window cluster-wide as this replica sees it (see Status).
func (l *Limiter) takeWindow(ctx context.Context, ks *keyState, w *window, limit, units int64, kind string) (int64, error) {
	for attempt := 0; ; attempt++ {
		now := l.clock()
		w.mu.Lock()
		w.roll(now, limit)
		if w.leased && w.have >= units {
			w.have -= units
			w.sinceLease += units
			if w.inflight == nil && !w.exhaust && w.have <= w.size/2 {
				w.inflight = make(chan struct{})
				go l.leaseWindow(ks, w, limit, w.inflight)
			}
			rem := max(0, limit-w.used+max(w.have, 0))
			w.mu.Unlock()
			return rem, nil
		}
		if w.leased && w.exhaust && w.have < units {
			end := w.end
			w.mu.Unlock()
			return 0, &LimitError{Kind: kind, Limit: limit, ResetAt: end, RetryAfter: end.Sub(now)}
		}
		ch := w.inflight
		if ch == nil {
			if w.lastErr != nil && now.Sub(w.errAt) < errRetryWindow || attempt >= 16 {
				err := w.lastErr
				w.mu.Unlock()
				if err == nil {
					err = errors.New("no lease granted")
				}
				return 0, &UnavailableError{Kind: kind, Err: err}
			}
			ch = make(chan struct{})
			w.inflight = ch
			go l.leaseWindow(ks, w, limit, ch)
		}
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		w.mu.Lock()
		failed := w.lastErr != nil && !w.leased
		err := w.lastErr
		w.mu.Unlock()
		if failed {
			return 0, &UnavailableError{Kind: kind, Err: err}
		}
	}
}

// leaseSize is the next lease's size: about one second of the traffic seen since the last
// lease, at least 1, at most max(1, limit/16), plus any tpm debt.
func (w *window) leaseSize(now time.Time, limit int64) int64 {
	cap := max(1, limit/16)
	size := int64(1)
	if !w.leaseAt.IsZero() && w.sinceLease > 0 {
		el := now.Sub(w.leaseAt)
		if el < time.Millisecond {
			el = time.Millisecond
		}
		size = int64(float64(w.sinceLease) * float64(time.Second) / float64(el))
	}
	size = min(max(size, 1), cap)
	if est := int64(w.perCall + 0.5); w.kind == "tpm" && est > size {
		size = min(est, max(1, limit/4)) // at least one call's reservation
	}
	w.size = size
	if w.have < 0 {
		size += -w.have
	}
	return size
}

func (l *Limiter) leaseWindow(ks *keyState, w *window, limit int64, ch chan struct{}) {
	w.mu.Lock()
	sent := l.clock()
	want := w.leaseSize(sent, limit)
	w.sinceLease, w.leaseAt = 0, sent
	w.mu.Unlock()
	if w.kind == "rpm" {
		l.rtRPM.Add(1)
	} else {
		l.rtTPM.Add(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.LeaseTimeout)
	g, err := l.cfg.Store.LeaseWindow(ctx, ks.token, w.kind, limit, want, l.cfg.Window)
	cancel()
	w.mu.Lock()
	defer func() {
		w.inflight = nil
		close(ch)
		w.mu.Unlock()
	}()
	if err != nil {
		l.leaseErrs.Add(1)
		w.lastErr, w.errAt = err, l.clock()
		l.cfg.Log.Warn().Err(err).Str("kind", w.kind).Msg("rate-limit lease failed")
		return
	}
	w.lastErr = nil
	if g.WindowStart.IsZero() { // the window turned while leasing: nothing granted
		return
	}
	end := sent.Add(g.WindowStart.Add(l.cfg.Window).Sub(g.DBNow))
	if !w.leased || !g.WindowStart.Equal(w.start) {
		// a new window: what was held belonged to the old one (a tpm debt too)
		w.have = 0
	}
	w.leased, w.start, w.end, w.limit = true, g.WindowStart, end, limit
	w.have += g.Granted
	w.used = g.Used
	w.exhaust = g.Used >= limit
}

// estimate is the tokens a tpm call reserves at admission: the average of recent calls (1
// before any), at most a quarter of the limit (at least 1).
func (w *window) estimate(limit int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	est := int64(w.perCall + 0.5)
	return max(1, min(est, limit/4))
}

// debit settles a tpm call: the tokens the upstream reported replace the reserved estimate in
// the key's token lease. When that leaves a debt (the call used more than this replica held),
// the debt is leased back before debit returns — before the answer reaches the client on a
// non-streamed call — so the cluster-wide window counts the tokens before the client can send
// its next call to any replica (API.md: tpm_limit overshoots by at most the calls in flight).
// A smaller remainder is topped up in the background as usual. With Postgres unreachable
// (a lease failed within errRetryWindow) the debt stays local and is settled by the next lease.
func (l *Limiter) debit(ks *keyState, limit, tokens, reserved int64) {
	w := &ks.tpm
	w.mu.Lock()
	if tokens > 0 {
		if w.perCall == 0 {
			w.perCall = float64(tokens)
		} else {
			w.perCall = 0.8*w.perCall + 0.2*float64(tokens)
		}
	}
	w.roll(l.clock(), limit)
	if !w.leased {
		w.mu.Unlock()
		return
	}
	w.have -= tokens - reserved
	w.sinceLease += tokens - reserved
	for range 3 {
		if w.have > w.size/2 || w.exhaust {
			break
		}
		debt := w.have < 0 && !(w.lastErr != nil && l.clock().Sub(w.errAt) < errRetryWindow)
		if ch := w.inflight; ch != nil {
			if !debt {
				break
			}
			w.mu.Unlock()
			<-ch // a lease sized before this debit: look again once it is in
			w.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		w.inflight = ch
		w.mu.Unlock()
		if !debt {
			go l.leaseWindow(ks, w, limit, ch)
			return
		}
		l.leaseWindow(ks, w, limit, ch)
		w.mu.Lock()
	}
	w.mu.Unlock()
}
