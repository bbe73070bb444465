// Package spend records what each upstream call cost and enforces key budgets across every
// replica (API.md "Keys (admin) and their limits": spend, max_budget, budget_duration).
//
// Cost of a call = prompt tokens × input_cost_per_token + completion tokens ×
// output_cost_per_token, both from the deployment's model_info (0 when unset), as LiteLLM
// prices a call from its model cost map. Each call becomes one gateway.spend_logs row; rows are
// buffered and written in batches (every FlushEvery, at most 1 s, or as soon as MaxBatch rows
// wait), together with the per-key totals in gateway.key_spend, in one round trip and never a
// NOTIFY. The same round trip reads back the cluster-wide totals of the budgeted keys this
// replica serves, so a key's budget check is: cluster total (as of the last flush) + this
// replica's unflushed spend >= max_budget → refused. A budget_duration resets the key's spend to
// 0 at budget_reset_at and moves budget_reset_at one duration on (database clock).
package spend

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"lockstep/pkg/store"
)

// Store is what the tracker needs from Postgres (implemented by *store.Store).
type Store interface {
	FlushSpend(ctx context.Context, logs []store.SpendLog, resets []store.BudgetReset, read []string) (map[string]store.KeySpend, time.Time, error)
}

var _ Store = (*store.Store)(nil)

// UnknownModel is the model label of spend recorded without a model group (a call no
// deployment served): one series for all such calls, never the name the client sent.
const UnknownModel = "unknown"

// Cost prices a call from a deployment's model_info: prompt × input_cost_per_token +
// completion × output_cost_per_token (USD; a missing or non-numeric price counts 0).
func Cost(modelInfo json.RawMessage, prompt, completion int64) float64 {
	if len(modelInfo) == 0 || (prompt == 0 && completion == 0) {
		return 0
	}
	in := gjson.GetBytes(modelInfo, "input_cost_per_token")
	out := gjson.GetBytes(modelInfo, "output_cost_per_token")
	c := 0.0
	if in.Type == gjson.Number {
		c += float64(prompt) * in.Float()
	}
	if out.Type == gjson.Number {
		c += float64(completion) * out.Float()
	}
	return c
}

// ImageCost prices an image generation that answered images images from a deployment's
// model_info: images × output_cost_per_image (USD; LiteLLM's field, as its
// default_image_cost_calculator prices n images). A missing or non-numeric price counts 0.
// input_cost_per_image (LiteLLM's price of an image sent in a prompt) is not charged here:
// a generation request sends none.
func ImageCost(modelInfo json.RawMessage, images int) float64 {
	if len(modelInfo) == 0 || images <= 0 {
		return 0
	}
	if out := gjson.GetBytes(modelInfo, "output_cost_per_image"); out.Type == gjson.Number {
		return float64(images) * out.Float()
	}
	return 0
}

// Budget is a key's budget; the zero value has none (a Max of 0 with Has set refuses
// every call, as LiteLLM's max_budget 0).
type Budget struct {
	Max   float64       // USD
	Has   bool          // max_budget is set
	Every time.Duration // budget_duration; 0: spend never resets
}

// BudgetError is a call refused because the key's spend reached its max_budget (HTTP 400,
// type budget_exceeded).
type BudgetError struct {
	Spend, Max float64
}

// Error is LiteLLM's message, numbers printed as Python prints floats.
func (e *BudgetError) Error() string {
	return "Budget has been exceeded! Current cost: " + PyFloat(e.Spend) + ", Max budget: " + PyFloat(e.Max)
}

// UnavailableError is a budgeted key refused because its cluster-wide spend was never read on
// this replica and the database is unreachable (HTTP 503).
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("the budget of this key is held in Postgres, which is unreachable, and this replica has not read its spend yet: %v", e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// PyFloat formats f as Python's repr(float) does (LiteLLM's messages are Python f-strings):
// the shortest round-tripping digits, "2.0" for integral values, exponent form ("1e-05",
// "1.5e+16") below 1e-4 and from 1e16 on.
func PyFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		switch {
		case math.IsNaN(f):
			return "nan"
		case f > 0:
			return "inf"
		}
		return "-inf"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expS)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// Config configures a Tracker.
type Config struct {
	Store     Store
	ReplicaID string
	// FlushEvery is the longest a spend log waits before it is written. Default 200 ms (the
	// contract allows at most 1 s); test knob GATEWAY_SPEND_FLUSH.
	FlushEvery time.Duration
	// MaxBatch rows waiting trigger a flush at once. Default 500.
	MaxBatch int
	// MaxBuffer bounds the rows kept while the database is unreachable; beyond it the oldest
	// are dropped and counted (their spend stays in the key totals of this replica only).
	// Default 100000.
	MaxBuffer int
	// RetentionPeriod > 0 deletes spend logs older than it, every RetentionInterval (default
	// DefaultRetentionInterval), when the Store is a Pruner (retention.go). 0: logs are kept.
	RetentionPeriod   time.Duration
	RetentionInterval time.Duration
	Log               zerolog.Logger
}

// Stats are the tracker's counters.
type Stats struct {
	SpendByModel map[string]float64 // USD recorded, by model group (store.SpendLog.ModelGroup, else UnknownModel)
	Logged       int64              // spend logs recorded
	Flushed      int64              // spend logs written
	Dropped      int64              // spend logs dropped while the database was unreachable
	Pruned       int64              // spend logs this replica deleted for retention
	Flushes      int64              // flush round trips
	FlushErrors  int64
}

// Tracker records spend and checks budgets. Safe for concurrent use.
type Tracker struct {
	cfg   Config
	clock func() time.Time

	mu  sync.Mutex // guards buf
	buf []store.SpendLog

	keys    sync.Map // token → *keyBudget
	byModel sync.Map // model → *atomic.Uint64 (float64 bits)

	kick                                         chan struct{}
	wake                                         chan struct{} // cap 1: the idle flusher should look again (poke)
	lastBudgeted                                 atomic.Int64  // clock's unix nanos of the last budget check (busy)
	stop, done                                   chan struct{}
	stopOnce                                     sync.Once
	started                                      atomic.Bool
	logged, flushed, dropped, flushes, flushErrs atomic.Int64
	pruned                                       atomic.Int64
}

type keyBudget struct {
	mu        sync.Mutex
	known     bool      // cluster was read at least once
	cluster   float64   // cluster-wide spend as of the last read (flushed spend of every replica)
	resetAt   time.Time // next reset, local clock; zero: none known
	unflushed float64   // this replica's spend not yet in cluster
	every     time.Duration
	budgeted  bool
	lastUse   time.Time
}

// New builds a Tracker; Start runs its flusher.
func New(cfg Config) *Tracker {
	if cfg.FlushEvery <= 0 || cfg.FlushEvery > time.Second {
		cfg.FlushEvery = 200 * time.Millisecond
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 500
	}
	if cfg.MaxBuffer <= 0 {
		cfg.MaxBuffer = 100000
	}
	return &Tracker{cfg: cfg, clock: time.Now, kick: make(chan struct{}, 1), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (t *Tracker) state(token string) *keyBudget {
	if v, ok := t.keys.Load(token); ok {
		return v.(*keyBudget)
	}
	v, _ := t.keys.LoadOrStore(token, &keyBudget{})
	return v.(*keyBudget)
}

// Check refuses a call of the key with token when its spend reached b.Max: a *BudgetError, or
// an *UnavailableError when the key's spend was never read here and the database is down. The
// first check of a budgeted key on a replica reads its cluster total (one round trip); later
// checks take none.
func (t *Tracker) Check(ctx context.Context, token string, b Budget) error {
	if !b.Has {
		return nil
	}
	kb := t.state(token)
	now := t.clock()
	kb.mu.Lock()
	kb.budgeted, kb.every, kb.lastUse = true, b.Every, now
	known := kb.known
	kb.mu.Unlock()
	t.lastBudgeted.Store(now.UnixNano())
	t.poke()
	if !known {
		if err := t.refresh(ctx, token); err != nil {
			return &UnavailableError{Err: err}
		}
	}
	kb.mu.Lock()
	spent := kb.current(now)
	kb.mu.Unlock()
	if spent >= b.Max {
		return &BudgetError{Spend: spent, Max: b.Max}
	}
	return nil
}

// current is the key's spend now: the cluster total (0 once the reset time passed) plus this
// replica's unflushed spend. kb.mu held.
func (kb *keyBudget) current(now time.Time) float64 {
	c := kb.cluster
	if !kb.resetAt.IsZero() && !now.Before(kb.resetAt) {
		c = 0
	}
	return c + kb.unflushed
}

// Spend returns this replica's view of a key's spend (cluster + unflushed) and its next reset
// (zero: none known); ok is false when this replica has no view of the key.
func (t *Tracker) Spend(token string) (spend float64, resetAt time.Time, ok bool) {
	v, found := t.keys.Load(token)
	if !found {
		return 0, time.Time{}, false
	}
	kb := v.(*keyBudget)
	kb.mu.Lock()
	defer kb.mu.Unlock()
	return kb.current(t.clock()), kb.resetAt, kb.known
}

// refresh reads one key's cluster total now (a flush with no logs).
func (t *Tracker) refresh(ctx context.Context, token string) error {
	kb := t.state(token)
	kb.mu.Lock()
	var resets []store.BudgetReset
	if kb.every > 0 {
		resets = []store.BudgetReset{{Token: token, Every: kb.every}}
	}
	kb.mu.Unlock()
	sent := t.clock()
	t.flushes.Add(1)
	got, dbNow, err := t.cfg.Store.FlushSpend(ctx, nil, resets, []string{token})
	if err != nil {
		t.flushErrs.Add(1)
		return err
	}
	t.apply(got, dbNow, sent, []string{token}, nil)
	return nil
}

// Record adds one call's spend log (its Spend already priced) to the next batch, and its spend
// to the unflushed totals of the key and of its owners (user, team, organization, end user;
// store.SpendLog.Tokens) at once.
func (t *Tracker) Record(l store.SpendLog) {
	t.logged.Add(1)
	if l.Spend != 0 {
		label := l.ModelGroup // bounded by the model table, never the client's string
		if label == "" {
			label = UnknownModel
		}
		v, ok := t.byModel.Load(label)
		if !ok {
			v, _ = t.byModel.LoadOrStore(label, new(atomic.Uint64))
		}
		addFloat(v.(*atomic.Uint64), l.Spend)
		for _, tok := range l.Tokens() {
			kb := t.state(tok)
			kb.mu.Lock()
			kb.unflushed += l.Spend
			kb.mu.Unlock()
		}
	}
	t.mu.Lock()
	if len(t.buf) >= t.cfg.MaxBuffer {
		t.buf = t.buf[1:]
		t.dropped.Add(1)
	}
	t.buf = append(t.buf, l)
	full := len(t.buf) >= t.cfg.MaxBatch
	t.mu.Unlock()
	t.poke()
	if full {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

func addFloat(u *atomic.Uint64, d float64) {
	for {
		old := u.Load()
		if u.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Stats returns the counters.
func (t *Tracker) Stats() Stats {
	st := Stats{SpendByModel: map[string]float64{}, Logged: t.logged.Load(), Flushed: t.flushed.Load(),
		Dropped: t.dropped.Load(), Flushes: t.flushes.Load(), FlushErrors: t.flushErrs.Load(), Pruned: t.pruned.Load()}
	t.byModel.Range(func(k, v any) bool {
		st.SpendByModel[k.(string)] = math.Float64frombits(v.(*atomic.Uint64).Load())
		return true
	})
	return st
}

// Start runs the flusher until Stop (or ctx ends).
func (t *Tracker) Start(ctx context.Context) error {
	t.started.Store(true)
	go t.loop(ctx)
	if p, ok := t.cfg.Store.(Pruner); ok && t.cfg.RetentionPeriod > 0 {
		go t.retentionLoop(ctx, p)
	}
	return nil
}

// Stop flushes what is buffered (one last attempt) and ends the flusher. Idempotent, blocking.
func (t *Tracker) Stop() {
	t.stopOnce.Do(func() {
		close(t.stop)
		if t.started.Load() {
			<-t.done
		}
	})
}

// loop flushes every FlushEvery while there is something to flush or read back (busy), and
// sleeps otherwise until Record or Check pokes it: an idle replica's flusher does not wake.
func (t *Tracker) loop(ctx context.Context) {
	defer close(t.done)
	tick := time.NewTicker(t.cfg.FlushEvery)
	defer tick.Stop()
	ticking := true
	for {
		var tickC <-chan time.Time
		var wake <-chan struct{}
		switch busy := t.busy(); {
		case busy && !ticking:
			tick.Reset(t.cfg.FlushEvery)
			ticking = true
		case !busy && ticking:
			tick.Stop()
			ticking = false
		}
		if ticking {
			tickC = tick.C
		} else {
			wake = t.wake
		}
		select {
		case <-ctx.Done():
			t.Flush(context.Background())
			return
		case <-t.stop:
			t.Flush(context.Background())
			return
		case <-tickC:
		case <-t.kick:
		case <-wake:
			continue // look again: a log was buffered or a budget checked
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := t.Flush(fctx); err != nil {
			t.cfg.Log.Warn().Err(err).Msg("spend flush failed; the logs are kept and retried")
		}
		cancel()
	}
}

// busy reports whether the flusher has work: logs buffered, or a budgeted key checked within
// trackFor (its cluster total is read back at every flush).
func (t *Tracker) busy() bool {
	t.mu.Lock()
	n := len(t.buf)
	t.mu.Unlock()
	return n > 0 || t.clock().Sub(time.Unix(0, t.lastBudgeted.Load())) < trackFor
}

// poke wakes the flusher if it sleeps idle (a no-op while it ticks).
func (t *Tracker) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// trackFor is how long after its last call a budgeted key's cluster total keeps being read.
const trackFor = 10 * time.Minute

// Flush writes up to MaxBatch buffered logs with their key totals and reads back the totals of
// the budgeted keys used here recently, in one round trip. On failure the logs go back to the
// front of the buffer.
func (t *Tracker) Flush(ctx context.Context) error {
	t.mu.Lock()
	n := min(len(t.buf), t.cfg.MaxBatch)
	batch := append([]store.SpendLog(nil), t.buf[:n]...)
	t.buf = append(t.buf[:0], t.buf[n:]...)
	t.mu.Unlock()

	now := t.clock()
	var read []string
	var resets []store.BudgetReset
	t.keys.Range(func(k, v any) bool {
		kb := v.(*keyBudget)
		kb.mu.Lock()
		if kb.budgeted && now.Sub(kb.lastUse) < trackFor {
			read = append(read, k.(string))
			if kb.every > 0 && (kb.resetAt.IsZero() || !now.Before(kb.resetAt)) {
				resets = append(resets, store.BudgetReset{Token: k.(string), Every: kb.every})
			}
		}
		kb.mu.Unlock()
		return true
	})
	if len(batch) == 0 && len(read) == 0 {
		return nil
	}
	sent := t.clock()
	t.flushes.Add(1)
	got, dbNow, err := t.cfg.Store.FlushSpend(ctx, batch, resets, read)
	if err != nil {
		t.flushErrs.Add(1)
		t.mu.Lock()
		t.buf = append(batch, t.buf...)
		if over := len(t.buf) - t.cfg.MaxBuffer; over > 0 {
			t.buf = t.buf[over:]
			t.dropped.Add(int64(over))
		}
		t.mu.Unlock()
		return err
	}
	t.flushed.Add(int64(len(batch)))
	t.apply(got, dbNow, sent, read, batch)
	return nil
}

// apply moves a flushed batch's spend from unflushed into the cluster totals just read.
func (t *Tracker) apply(got map[string]store.KeySpend, dbNow, sent time.Time, read []string, batch []store.SpendLog) {
	perKey := map[string]float64{}
	for _, l := range batch {
		for _, tok := range l.Tokens() {
			perKey[tok] += l.Spend
		}
	}
	touched := map[string]bool{}
	for tok := range perKey {
		touched[tok] = true
	}
	for _, tok := range read {
		touched[tok] = true
	}
	for tok := range touched {
		kb := t.state(tok)
		kb.mu.Lock()
		kb.unflushed -= perKey[tok]
		if kb.unflushed < 1e-12 && kb.unflushed > -1e-12 {
			kb.unflushed = 0
		}
		if ks, ok := got[tok]; ok {
			kb.cluster, kb.known = ks.Spend, true
			kb.resetAt = time.Time{}
			if ks.BudgetResetAt != nil {
				kb.resetAt = sent.Add(ks.BudgetResetAt.Sub(dbNow))
			}
		} else if slicesContains(read, tok) {
			kb.cluster, kb.known, kb.resetAt = 0, true, time.Time{}
		} else if perKey[tok] != 0 {
			kb.cluster += perKey[tok] // not read back (not budgeted): keep a running view
		}
		kb.mu.Unlock()
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Unflushed returns this replica's spend of a key not yet written to the database.
func (t *Tracker) Unflushed(token string) float64 {
	v, ok := t.keys.Load(token)
	if !ok {
		return 0
	}
	kb := v.(*keyBudget)
	kb.mu.Lock()
	defer kb.mu.Unlock()
	return kb.unflushed
}
