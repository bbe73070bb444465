// Package registry holds the in-memory registries every replica serves from: a generic,
// versioned, copy-on-write registry (lock-free reads through an atomic pointer to an immutable
// snapshot), and the bounded read-through that fills it on a miss.
//
// A Registry implements notify.Sink, so the change feed (notifications, catch-up, full
// reconcile) and read-throughs all go through the same version-guarded Apply.
//
// Snapshots are sharded (256 shards by key hash) so a write copies only the shards it touches:
// a change costs O(registry size / 256), not O(registry size), which keeps a 200k-key registry
// applying a change in a few hundred microseconds (BenchmarkApplyLargeRegistry).
package registry

import (
	"context"
	"errors"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/pkg/notify"
	"lockstep/pkg/readthrough"
	"lockstep/pkg/store"
)

// Entry is one object as served: its id, version, source and the runtime value built from
// its row. Entries are immutable once published.
//
// An entry is 48 bytes (a million keys' entries: 48 MB). What is not kept: the names it is
// indexed under (Options.Names(e) gives them again) and the row it was built from (a value
// that serves its row keeps it itself, like a2a.Agent.Row).
type Entry[T any] struct {
	ID      string
	Version int64 // gateway.<table>.version; 0 for config entries
	Config  bool  // from the config file: DB sync never touches it
	Value   T
	gen     uint64 // local apply generation, for the reconcile race (see Diff)
}

const shards = 256

var seed = maphash.MakeSeed()

func shardOf(key string) int { return int(hashOf(key) % shards) }

// Snapshot is an immutable view of a registry. Read it without locks.
//
// Its entries are spread over shards id shards and as many name shards by hash, and the
// shards are grouped groups to a table (shardGroup): a write copies the one shard it changes,
// that shard's group (256 bytes) and the snapshot (136 bytes), not a table of every shard
// (4 KB: every notification's publish allocated that twice, and 20 replicas on 2 cores
// garbage-collected in step, docs/scale-out.md).
type Snapshot[T any] struct {
	groups [groups]*shardGroup[T] // nil: every shard of the group is empty
	n      int
}

const (
	groups   = 16
	perGroup = shards / groups
)

// shardGroup is perGroup consecutive id shards and name shards.
type shardGroup[T any] struct {
	ids   [perGroup]*index[T] // nil: an empty shard
	names [perGroup]map[string][]*Entry[T]
}

// idIndex is id shard i (nil when empty).
func (s *Snapshot[T]) idIndex(i uint64) *index[T] {
	if g := s.groups[i/perGroup]; g != nil {
		return g.ids[i%perGroup]
	}
	return nil
}

// nameMap is name shard i (nil when empty).
func (s *Snapshot[T]) nameMap(i int) map[string][]*Entry[T] {
	if g := s.groups[i/perGroup]; g != nil {
		return g.names[i%perGroup]
	}
	return nil
}

// ByID returns the entry with primary key id.
func (s *Snapshot[T]) ByID(id string) (*Entry[T], bool) {
	h := hashOf(id)
	e := s.idIndex(h%shards).get(id, h)
	return e, e != nil
}

// ByName returns the entries indexed under name (a model group's deployments, a guardrail
// or agent name). The slice must not be modified.
func (s *Snapshot[T]) ByName(name string) []*Entry[T] { return s.nameMap(shardOf(name))[name] }

// Len is the number of entries.
func (s *Snapshot[T]) Len() int { return s.n }

// All calls fn for every entry, in no particular order, until fn returns false.
func (s *Snapshot[T]) All(fn func(*Entry[T]) bool) {
	for _, g := range s.groups {
		if g == nil {
			continue
		}
		for _, x := range g.ids {
			if !x.all(fn) {
				return
			}
		}
	}
}

// Names returns every indexed name.
func (s *Snapshot[T]) Names() []string {
	var out []string
	for _, g := range s.groups {
		if g == nil {
			continue
		}
		for _, m := range g.names {
			for n := range m {
				out = append(out, n)
			}
		}
	}
	return out
}

// Options configures a Registry. Build is required.
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
	// MissBarrierTimeout bounds how long Resolve waits for the notification barrier that makes
	// a miss authoritative (see Resolve). Default 1 s: a healthy barrier takes about one
	// NOTIFY round trip; the bound only matters when Postgres hangs.
	MissBarrierTimeout time.Duration
}

type tombstone struct {
	version int64
	gen     uint64 // local generation it was recorded at (see Repair)
	at      time.Time
}

// Registry is a generic versioned registry. Reads (Load) never lock; writes copy the touched
// shards under a mutex and publish a new snapshot atomically.
type Registry[T any] struct {
	opts  Options[T]
	snap  atomic.Pointer[Snapshot[T]]
	mu    sync.Mutex
	tombs map[string]tombstone
	// failed remembers the newest version of each id whose Build failed, so the feed does not
	// re-read (and re-count) a version already known to be invalid.
	failed map[string]int64
	// floor is the version of the last TRUNCATE of the table: every row that existed before it
	// has a lower version, every row written after it a higher one (TRUNCATE holds an ACCESS
	// EXCLUSIVE lock and draws its version from the same sequence).
	floor     int64
	lastPrune time.Time
	gen       uint64
	rt        *readthrough.Group
	// changed is closed and replaced on every publish ("something changed" broadcast).
	changed atomic.Pointer[chan struct{}]
	// barrier proves the registry exact as of the call (the change feed's notification
	// barrier); nil until SetBarrier.
	barrier atomic.Pointer[func(context.Context) error]

	applyErrors atomic.Int64
}

var _ Info = (*Registry[int])(nil)

// Info is what every registry reports whatever it holds: the change feed applies to it (Sink),
// /sync/lag and /metrics read its counts. A list of Info is how the wiring (cmd/gateway) and
// the API walk all registries without naming each one.
type Info interface {
	notify.Sink
	Len() int
	ApplyErrors() int64
	ReadThroughStats() readthrough.Stats
}

// New builds an empty registry.
func New[T any](opts Options[T]) *Registry[T] {
	if opts.TombstoneTTL == 0 {
		opts.TombstoneTTL = 10 * time.Minute
	}
	if opts.MissBarrierTimeout == 0 {
		opts.MissBarrierTimeout = time.Second
	}
	r := &Registry[T]{opts: opts, tombs: map[string]tombstone{}, failed: map[string]int64{}}
	ch := make(chan struct{})
	r.changed.Store(&ch)
	r.snap.Store(&Snapshot[T]{})
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

// Changed returns a channel closed at the next publish.
func (r *Registry[T]) Changed() <-chan struct{} { return *r.changed.Load() }

// Has reports whether name is held, as an id or an indexed name.
func (r *Registry[T]) Has(name string) bool {
	s := r.snap.Load()
	if _, ok := s.ByID(name); ok {
		return true
	}
	return len(s.ByName(name)) > 0
}

// cow is one copy-on-write edit of a snapshot: shards are copied on first touch.
type cow[T any] struct {
	r            *Registry[T]
	next         *Snapshot[T] // a copy of the published snapshot, private until commit publishes it
	groupsCopied bitset       // of groups: copied into next (bitsets keep a cow at ~150 bytes: one per applied change)
	idsCopied    bitset       // of shards
	namesCopied  bitset       // of shards
	names        []string     // names touched, for the negative cache
	dirty        bool
}

// bitset is a set of shard (or group) numbers below shards.
type bitset [shards / 64]uint64

func (b *bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b *bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }

func (r *Registry[T]) edit() *cow[T] {
	next := *r.snap.Load() // a copy of the group table, published as is by commit
	return &cow[T]{r: r, next: &next}
}

// group returns the (copied) group of shard i.
func (c *cow[T]) group(i int) *shardGroup[T] {
	gi := i / perGroup
	if !c.groupsCopied.has(gi) {
		g := new(shardGroup[T])
		if old := c.next.groups[gi]; old != nil {
			*g = *old
		}
		c.next.groups[gi] = g
		c.groupsCopied.set(gi)
	}
	return c.next.groups[gi]
}

// idShard returns the (copied) index of shard i, with room for one more entry.
func (c *cow[T]) idShard(i uint64) *index[T] {
	if !c.idsCopied.has(int(i)) {
		c.group(int(i)).ids[i%perGroup] = c.next.idIndex(i).clone(1)
		c.idsCopied.set(int(i))
	}
	return c.next.idIndex(i)
}

func (c *cow[T]) nameShard(name string) map[string][]*Entry[T] {
	i := shardOf(name)
	if !c.namesCopied.has(i) {
		old := c.next.nameMap(i)
		m := make(map[string][]*Entry[T], len(old)+1)
		for k, v := range old {
			m[k] = v
		}
		c.group(i).names[i%perGroup] = m
		c.namesCopied.set(i)
	}
	return c.next.nameMap(i)
}

// remove takes the entry with id out of the snapshot and its name index.
func (c *cow[T]) remove(id string) {
	h := hashOf(id)
	old := c.next.idIndex(h%shards).get(id, h)
	if old == nil {
		return
	}
	c.idShard(h%shards).del(id, h)
	c.next.n--
	for _, n := range c.r.namesOf(old) {
		m := c.nameShard(n)
		list := m[n]
		kept := make([]*Entry[T], 0, len(list))
		for _, e := range list {
			if e.ID != id {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			delete(m, n)
		} else {
			m[n] = kept
		}
	}
	c.dirty = true
}

// put adds (or replaces) an entry.
func (c *cow[T]) put(e *Entry[T]) {
	c.remove(e.ID)
	names := c.r.namesOf(e)
	h := hashOf(e.ID)
	c.idShard(h%shards).set(e, h)
	c.next.n++
	for _, n := range names {
		m := c.nameShard(n)
		list := make([]*Entry[T], 0, len(m[n])+1)
		m[n] = append(append(list, m[n]...), e)
	}
	c.names = append(append(c.names, names...), e.ID)
	c.dirty = true
}

// namesOf is the names e is indexed under (Options.Names; none when it is nil).
func (r *Registry[T]) namesOf(e *Entry[T]) []string {
	if r.opts.Names == nil {
		return nil
	}
	return r.opts.Names(e)
}

// commit publishes the edit and broadcasts the change. Caller holds r.mu.
func (c *cow[T]) commit() {
	if !c.dirty {
		return
	}
	c.r.snap.Store(c.next)
	ch := make(chan struct{})
	close(*c.r.changed.Swap(&ch))
	if c.r.rt != nil {
		c.r.rt.Forget(c.names...)
	}
}

// SetConfig replaces every config-sourced entry (config file objects). DB entries are kept.
func (r *Registry[T]) SetConfig(values map[string]T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.edit()
	r.snap.Load().All(func(e *Entry[T]) bool {
		if e.Config {
			c.remove(e.ID)
		}
		return true
	})
	r.gen++
	for id, v := range values {
		c.put(&Entry[T]{ID: id, Config: true, Value: v, gen: r.gen})
	}
	c.commit()
}

func (r *Registry[T]) newer(id string, version int64, cur *Entry[T]) bool {
	if cur != nil && (cur.Config || cur.Version >= version) {
		return false
	}
	if r.floor > 0 && version <= r.floor {
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
	// Build outside the lock: an invalid row is counted and skipped, the old entry keeps serving.
	// A large batch (a full load, a bulk insert) is built on every core (buildAll). The rows
	// built are those with errs[i] == nil (no copy of them: a million rows are 80 MB).
	vals, errs := r.buildAll(rows)
	var bad []store.Row
	good := 0
	for i, row := range rows {
		switch {
		case errs[i] == errKnownBad:
		case errs[i] != nil:
			r.applyErrors.Add(1)
			if r.opts.OnApplyError != nil {
				r.opts.OnApplyError(row.ID, errs[i])
			}
			bad = append(bad, row)
		default:
			good++
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, row := range bad {
		if f, ok := r.failed[row.ID]; !ok || row.Version > f {
			r.failed[row.ID] = row.Version
		}
	}
	c := r.edit()
	r.gen++
	changed := 0
	filled := false
	if c.next.n == 0 && good >= parallelBuild {
		// an empty registry's bulk load (a cold start): every shard filled on every core
		entries := make([]*Entry[T], 0, good)
		for i, row := range rows {
			if errs[i] == nil && r.newer(row.ID, row.Version, nil) && !r.isBad(row.ID, row.Version) {
				entries = append(entries, &Entry[T]{ID: row.ID, Version: row.Version, Value: vals[i], gen: r.gen})
			}
		}
		if filled = c.fillEmpty(entries); filled {
			for _, e := range entries {
				if len(r.failed) == 0 {
					break
				}
				delete(r.failed, e.ID)
			}
			changed = len(entries)
		}
	}
	for i, row := range rows {
		if filled {
			break
		}
		cur, _ := c.next.ByID(row.ID)
		// re-check the known-bad version under the lock: a newer invalid version may have
		// been recorded while this row was being built
		if errs[i] != nil || !r.newer(row.ID, row.Version, cur) || r.isBad(row.ID, row.Version) {
			continue
		}
		delete(r.failed, row.ID)
		c.put(&Entry[T]{ID: row.ID, Version: row.Version, Value: vals[i], gen: r.gen})
		changed++
	}
	now := time.Now()
	for id, v := range absent {
		cur, _ := c.next.ByID(id)
		if cur != nil && cur.Config {
			continue
		}
		if t, ok := r.tombs[id]; !ok || t.version < v {
			r.tombs[id] = tombstone{version: v, gen: r.gen, at: now}
		}
		if f, ok := r.failed[id]; ok && f < v {
			delete(r.failed, id)
		}
		if cur != nil && cur.Version < v {
			c.remove(id)
			changed++
		}
	}
	c.commit()
	r.pruneTombstones(now)
	return changed
}

// errKnownBad marks a row buildAll skipped: this version (or a newer one) already failed.
var errKnownBad = errors.New("known bad")

// parallelBuild is the batch size from which Apply builds rows on every core.
const parallelBuild = 2048

// buildAll builds every row (Options.Build), in parallel chunks across GOMAXPROCS for a
// large batch; vals[i], errs[i] are row i's outcome (errKnownBad: skipped). Build must be
// safe for concurrent use (it is a pure function of the row).
func (r *Registry[T]) buildAll(rows []store.Row) ([]T, []error) {
	vals := make([]T, len(rows))
	errs := make([]error, len(rows))
	r.mu.Lock()
	anyBad := len(r.failed) > 0
	r.mu.Unlock()
	one := func(i int) {
		if anyBad && r.knownBad(rows[i].ID, rows[i].Version) {
			errs[i] = errKnownBad
			return
		}
		if v, err, ok := built[T](rows[i]); ok {
			vals[i], errs[i] = v, err
			return
		}
		vals[i], errs[i] = r.opts.Build(rows[i])
	}
	workers := min(runtime.GOMAXPROCS(0), len(rows)/parallelBuild)
	if workers <= 1 {
		for i := range rows {
			one(i)
		}
		return vals, errs
	}
	var wg sync.WaitGroup
	chunk := (len(rows) + workers - 1) / workers
	for lo := 0; lo < len(rows); lo += chunk {
		hi := min(lo+chunk, len(rows))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				one(i)
			}
		}()
	}
	wg.Wait()
	return vals, errs
}

func (r *Registry[T]) pruneTombstones(now time.Time) {
	if len(r.tombs) < 1024 || now.Sub(r.lastPrune) < time.Minute {
		return
	}
	r.lastPrune = now
	cut := now.Add(-r.opts.TombstoneTTL)
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
	if e, ok := r.snap.Load().ByID(id); ok && (e.Config || e.Version >= version) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tombs[id]; ok && t.version >= version {
		return true
	}
	return (r.floor > 0 && version <= r.floor) || r.isBad(id, version)
}

// isBad reports whether version (or a newer one) of id failed to build. Caller holds r.mu.
func (r *Registry[T]) isBad(id string, version int64) bool {
	f, ok := r.failed[id]
	return ok && f >= version
}

// Truncate applies a TRUNCATE of the table, reported with the truncate's version: every DB
// entry older than it is evicted, and no older version is ever applied again (a read-through
// or reconcile that read before the truncate cannot resurrect a row). Config entries stay.
// Returns how many entries it evicted.
func (r *Registry[T]) Truncate(version int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if version > r.floor {
		r.floor = version
	}
	c := r.edit()
	n := 0
	c.next.All(func(e *Entry[T]) bool {
		if !e.Config && e.Version < version {
			c.remove(e.ID)
			n++
		}
		return true
	})
	if n > 0 {
		r.gen++
	}
	c.commit()
	return n
}

// knownBad reports whether this exact version (or a newer one) of id already failed to build.
func (r *Registry[T]) knownBad(id string, version int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.isBad(id, version)
}
