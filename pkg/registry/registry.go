// Package registry holds the in-memory registries every replica serves from: a generic,
// versioned, copy-on-write registry (lock-free reads through an atomic pointer to an immutable
// snapshot), and the bounded read-through that fills it on a miss.
//
// A Registry implements notify.Sink, so the change feed (notifications, catch-up, full
// reconcile) and read-throughs all go through the same version-guarded Apply.
package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/pkg/notify"
	"lockstep/pkg/readthrough"
	"lockstep/pkg/store"
)

// Entry is one object as served: its id, version, source and the runtime value built from
// its row. Entries are immutable once published.
type Entry[T any] struct {
	ID      string
	Version int64 // gateway.<table>.version; 0 for config entries
	Config  bool  // from the config file: DB sync never touches it
	Row     []byte
	Value   T
	gen     uint64 // local apply generation, for the reconcile race (see Reconcile)
}

// Snapshot is an immutable view of a registry. Read it without locks.
type Snapshot[T any] struct {
	byID   map[string]*Entry[T]
	byName map[string][]*Entry[T]
}

// ByID returns the entry with primary key id.
func (s *Snapshot[T]) ByID(id string) (*Entry[T], bool) {
	e, ok := s.byID[id]
	return e, ok
}

// ByName returns the entries indexed under name (a model group's deployments, a guardrail
// or agent name). The slice must not be modified.
func (s *Snapshot[T]) ByName(name string) []*Entry[T] { return s.byName[name] }

// Len is the number of entries.
func (s *Snapshot[T]) Len() int { return len(s.byID) }

// All calls fn for every entry, in no particular order, until fn returns false.
func (s *Snapshot[T]) All(fn func(*Entry[T]) bool) {
	for _, e := range s.byID {
		if !fn(e) {
			return
		}
	}
}

// Names returns every indexed name.
func (s *Snapshot[T]) Names() []string {
	out := make([]string, 0, len(s.byName))
	for n := range s.byName {
		out = append(out, n)
	}
	return out
}

// Options configures a Registry. Build and Names are required.
type Options[T any] struct {
	Type store.ObjectType
	// Build turns a loaded row into the runtime value. An error keeps the serving entry
	// (an invalid new version never replaces a serving one) and counts an apply error.
	Build func(row store.Row) (T, error)
	// Names lists the secondary names an entry is found under (may be nil).
	Names func(e *Entry[T]) []string
	// Load fetches the rows for one requested name on a read-through miss (store.LoadByName).
	// Nil disables read-through (supported_db_objects excludes the type).
	Load func(ctx context.Context, name string) ([]store.Row, error)
	// ReadThrough bounds read-throughs; zero fields take readthrough's defaults.
	ReadThrough readthrough.Options
	// TombstoneTTL is how long a delete's version is remembered to refuse stale applies.
	// Default 10 minutes: far longer than any read-through or apply can be in flight.
	TombstoneTTL time.Duration
	// OnApplyError is called for each row Build refused (logging); optional.
	OnApplyError func(id string, err error)
	// MissWait bounds how long Resolve waits for the change feed to apply the name when the
	// read-through failed closed (budget exhausted, DB error). A create on another replica is
	// normally applied here within a millisecond or two of its commit, so a provisioning
	// script outrunning the budget still sees its objects, without a DB read. Default 100 ms.
	MissWait time.Duration
}

type tombstone struct {
	version int64
	at      time.Time
}

// Registry is a generic versioned registry. Reads (Load) never lock; writes copy the
// snapshot under a mutex and publish it atomically.
type Registry[T any] struct {
	opts  Options[T]
	snap  atomic.Pointer[Snapshot[T]]
	mu    sync.Mutex
	tombs map[string]tombstone
	// failed remembers the newest version of each id whose Build failed, so the feed does not
	// re-read (and re-count) a version already known to be invalid.
	failed map[string]int64
	gen    uint64
	rt     *readthrough.Group
	// changed is closed and replaced on every publish ("something changed" broadcast).
	changed atomic.Pointer[chan struct{}]

	applyErrors atomic.Int64
}

var _ notify.Sink = (*Registry[int])(nil)

// New builds an empty registry.
func New[T any](opts Options[T]) *Registry[T] {
	if opts.TombstoneTTL == 0 {
		opts.TombstoneTTL = 10 * time.Minute
	}
	if opts.MissWait == 0 {
		opts.MissWait = 100 * time.Millisecond
	}
	r := &Registry[T]{opts: opts, tombs: map[string]tombstone{}, failed: map[string]int64{}}
	ch := make(chan struct{})
	r.changed.Store(&ch)
	r.snap.Store(&Snapshot[T]{byID: map[string]*Entry[T]{}, byName: map[string][]*Entry[T]{}})
	if opts.Load != nil {
		r.rt = readthrough.New(r.fetch, opts.ReadThrough)
	}
	return r
}

// Type is the object type this registry holds.
func (r *Registry[T]) Type() store.ObjectType { return r.opts.Type }

// Load returns the current snapshot (lock-free).
func (r *Registry[T]) Load() *Snapshot[T] { return r.snap.Load() }

// Len is the number of entries served.
func (r *Registry[T]) Len() int { return r.snap.Load().Len() }

// ApplyErrors counts rows whose Build failed.
func (r *Registry[T]) ApplyErrors() int64 { return r.applyErrors.Load() }

// ReadThroughStats returns the read-through counters (zero when read-through is off).
func (r *Registry[T]) ReadThroughStats() readthrough.Stats {
	if r.rt == nil {
		return readthrough.Stats{}
	}
	return r.rt.Stats()
}

// SetConfig replaces every config-sourced entry (config file objects). DB entries are kept.
func (r *Registry[T]) SetConfig(values map[string]T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	byID := make(map[string]*Entry[T], len(old.byID)+len(values))
	for id, e := range old.byID {
		if !e.Config {
			byID[id] = e
		}
	}
	r.gen++
	for id, v := range values {
		byID[id] = &Entry[T]{ID: id, Config: true, Value: v, gen: r.gen}
	}
	r.publish(byID)
}

func (r *Registry[T]) publish(byID map[string]*Entry[T]) {
	byName := make(map[string][]*Entry[T], len(byID))
	if r.opts.Names != nil {
		for _, e := range byID {
			for _, n := range r.opts.Names(e) {
				byName[n] = append(byName[n], e)
			}
		}
	}
	r.snap.Store(&Snapshot[T]{byID: byID, byName: byName})
	if r.changed.Load() != nil {
		ch := make(chan struct{})
		close(*r.changed.Swap(&ch))
	}
}

// Changed returns a channel closed at the next publish.
func (r *Registry[T]) Changed() <-chan struct{} { return *r.changed.Load() }

// Has reports whether name is held, as an id or an indexed name.
func (r *Registry[T]) Has(name string) bool {
	s := r.snap.Load()
	if _, ok := s.byID[name]; ok {
		return true
	}
	return len(s.byName[name]) > 0
}

func (r *Registry[T]) newer(id string, version int64, cur *Entry[T]) bool {
	if cur != nil && (cur.Config || cur.Version >= version) {
		return false
	}
	if t, ok := r.tombs[id]; ok && t.version >= version {
		return false
	}
	return true
}

// Apply is the version-guarded apply every path uses (notification, catch-up, read-through,
// writer-local apply). rows are the current rows re-read from Postgres; absent maps ids
// that were re-read and not found (deleted, or filtered out like an inactive guardrail) to
// the version of the change that reported them (a delete's OLD.version+1). An apply whose
// version is not newer than the entry held, or than its tombstone, is a no-op; config
// entries are never touched. Returns how many entries changed.
func (r *Registry[T]) Apply(rows []store.Row, absent map[string]int64) int {
	type built struct {
		row store.Row
		val T
	}
	// Build outside the lock: an invalid row is counted and skipped, the old entry keeps serving.
	ok := make([]built, 0, len(rows))
	var bad []store.Row
	for _, row := range rows {
		if r.knownBad(row.ID, row.Version) {
			continue
		}
		v, err := r.opts.Build(row)
		if err != nil {
			r.applyErrors.Add(1)
			if r.opts.OnApplyError != nil {
				r.opts.OnApplyError(row.ID, err)
			}
			bad = append(bad, row)
			continue
		}
		ok = append(ok, built{row, v})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, row := range bad {
		if row.Version > r.failed[row.ID] {
			r.failed[row.ID] = row.Version
		}
	}
	old := r.snap.Load()
	var byID map[string]*Entry[T]
	cow := func() {
		if byID == nil {
			byID = make(map[string]*Entry[T], len(old.byID)+len(ok))
			for k, v := range old.byID {
				byID[k] = v
			}
		}
	}
	r.gen++
	changed := 0
	var names []string
	for _, b := range ok {
		if !r.newer(b.row.ID, b.row.Version, old.byID[b.row.ID]) {
			continue
		}
		cow()
		delete(r.failed, b.row.ID)
		e := &Entry[T]{ID: b.row.ID, Version: b.row.Version, Row: b.row.Data, Value: b.val, gen: r.gen}
		byID[b.row.ID] = e
		if r.opts.Names != nil {
			names = append(names, r.opts.Names(e)...)
		}
		changed++
	}
	for id, v := range absent {
		cur := old.byID[id]
		if cur != nil && cur.Config {
			continue
		}
		if t, ok := r.tombs[id]; !ok || t.version < v {
			r.tombs[id] = tombstone{version: v, at: time.Now()}
		}
		if r.failed[id] < v {
			delete(r.failed, id)
		}
		if cur != nil && cur.Version < v {
			cow()
			delete(byID, id)
			changed++
		}
	}
	if byID != nil {
		r.publish(byID)
	}
	r.pruneTombstones()
	if r.rt != nil {
		r.rt.Forget(names...)
	}
	return changed
}

func (r *Registry[T]) pruneTombstones() {
	if len(r.tombs) < 1024 {
		return
	}
	cut := time.Now().Add(-r.opts.TombstoneTTL)
	for id, t := range r.tombs {
		if t.at.Before(cut) {
			delete(r.tombs, id)
		}
	}
}

// Holds reports whether the registry already reflects version (or newer) of id: held,
// deleted, or known to be invalid. The change feed uses it to skip re-reading changes it has
// already applied.
func (r *Registry[T]) Holds(id string, version int64) bool {
	if e, ok := r.snap.Load().byID[id]; ok && (e.Config || e.Version >= version) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tombs[id]; ok && t.version >= version {
		return true
	}
	return r.failed[id] >= version
}

// knownBad reports whether this exact version (or a newer one) of id already failed to build.
func (r *Registry[T]) knownBad(id string, version int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed[id] >= version && version > 0
}

// Generation returns the local apply generation; Reconcile compares against it.
func (r *Registry[T]) Generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// Reconcile makes the registry match a full load taken at one DB snapshot. startGen must be
// Generation() read BEFORE that snapshot was taken: an entry applied at a later generation
// may have been loaded after the snapshot (by a notification or read-through) and is never
// evicted or downgraded. Newer rows are applied through Apply's version guard. Returns the
// drift: entries that were missing, stale or should have been gone.
func (r *Registry[T]) Reconcile(rows []store.Row, startGen uint64) int {
	old := r.snap.Load()
	seen := make(map[string]struct{}, len(rows))
	var fresh []store.Row
	for _, row := range rows {
		seen[row.ID] = struct{}{}
		if e, ok := old.byID[row.ID]; !ok || (!e.Config && e.Version < row.Version) {
			fresh = append(fresh, row)
		}
	}
	drift := r.Apply(fresh, nil)
	// Evictions: entries the snapshot does not have, loaded before the snapshot.
	r.mu.Lock()
	cur := r.snap.Load()
	var byID map[string]*Entry[T]
	for id, e := range cur.byID {
		if e.Config || e.gen > startGen {
			continue
		}
		if _, ok := seen[id]; ok {
			continue
		}
		if byID == nil {
			byID = make(map[string]*Entry[T], len(cur.byID))
			for k, v := range cur.byID {
				byID[k] = v
			}
		}
		delete(byID, id)
		r.tombs[id] = tombstone{version: e.Version + 1, at: time.Now()}
		drift++
	}
	if byID != nil {
		r.gen++
		r.publish(byID)
	}
	r.mu.Unlock()
	return drift
}

// ErrNotFound is returned by Resolve when the name is unknown after any read-through.
var ErrNotFound = errors.New("not found")

// Resolve runs a read-through for a missed name: it loads the rows for name from Postgres and
// applies them (version-guarded), so the caller's next lookup sees them. Outcome per
// readthrough.Group.Do: found, not found (negative-cached), or a fail-closed miss (budget
// exhausted, DB error). Returns nil when rows were applied; ErrNotFound otherwise.
func (r *Registry[T]) Resolve(ctx context.Context, name string) error {
	if r.rt == nil {
		return ErrNotFound
	}
	res := r.rt.Do(ctx, name)
	if res.Found {
		return nil
	}
	if res.BudgetExhausted || res.Err != nil {
		// Failed closed: no DB read. Give the change feed a moment to apply the name.
		if r.waitFor(ctx, name, r.opts.MissWait) {
			return nil
		}
	}
	if res.Err != nil {
		return fmt.Errorf("%w: %v", ErrNotFound, res.Err)
	}
	return ErrNotFound
}

// waitFor waits up to d for name to be published.
func (r *Registry[T]) waitFor(ctx context.Context, name string, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		ch := r.Changed()
		if r.Has(name) {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return r.Has(name)
		case <-ctx.Done():
			return false
		}
	}
}

func (r *Registry[T]) fetch(ctx context.Context, name string) (bool, error) {
	rows, err := r.opts.Load(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.Apply(rows, nil)
	return true, nil
}
