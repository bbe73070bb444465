package notify

import (
	"slices"
	"sync"
	"time"

	"lockstep/pkg/store"
)

// The change-path trace: for each of the last traceSize notified changes, when this replica
// received its notification, parsed it, the applier took it, sent the re-read, got the answer
// and published the registry shard (monotonic clock readings), beside the trigger's
// clock_timestamp (the database's wall clock). It costs a few clock readings and one locked
// copy per applied batch; /sync/trace serves it and /sync/lag summarises it per stage
// (stages_ms), so a benchmark learns where propagation time goes without probing the
// registry over HTTP (which would load the replica it measures).

// traceSize is how many notified changes the trace keeps (about 20 s of changes at 200/s).
const traceSize = 4096

// traceBase anchors the trace's monotonic readings: mono() is the time since it (Go's
// monotonic clock), and traceBase's wall clock converts a reading to wall time for comparison
// with the database's clock_timestamp and with other processes on the same host.
var traceBase = time.Now()

// mono is a monotonic clock reading, nanoseconds since traceBase.
func mono() int64 { return int64(time.Since(traceBase)) }

// monoWallMicros converts a mono reading to wall-clock microseconds since the epoch (0 stays 0).
func monoWallMicros(m int64) int64 {
	if m == 0 {
		return 0
	}
	return traceBase.UnixMicro() + m/1000
}

// traceEntry is one change's path through this replica. Times are mono readings; a change
// the registry already held (the writer's own apply, or an earlier read-through) was not
// re-read: sent and answered are 0.
type traceEntry struct {
	seq       int64
	typ       store.ObjectType
	id        string
	committed int64 // the trigger's clock_timestamp, µs since the epoch (database clock)
	received  int64 // notification handed to the feed (listen: pgconn's callback; logical: decoded)
	parsed    int64 // payload decoded, about to be queued for the applier
	dequeued  int64 // the applier took it off the queue
	sent      int64 // its re-read sent (0: already held, nothing to read)
	answered  int64 // the re-read answered
	published int64 // applied and published (the registry snapshot stored)
}

// traceRing holds the last traceSize entries.
type traceRing struct {
	mu   sync.Mutex
	buf  [traceSize]traceEntry
	next uint64 // entries ever added
}

// stageTimes is one re-read's timing, per object type of a batch.
type stageTimes struct {
	typ                       store.ObjectType
	sent, answered, published int64
}

// addBatch records one applied batch of notified changes.
func (t *traceRing) addBatch(batch []event, dequeued int64, times []stageTimes, done int64) {
	t.mu.Lock()
	for i := range batch {
		ev := &batch[i]
		e := traceEntry{seq: ev.Seq, typ: ev.Type, id: ev.ID, committed: ev.TS, received: ev.received, parsed: ev.parsed, dequeued: dequeued, published: done}
		for _, st := range times {
			if st.typ == ev.Type {
				e.sent, e.answered, e.published = st.sent, st.answered, st.published
				break
			}
		}
		t.buf[t.next%traceSize] = e
		t.next++
	}
	t.mu.Unlock()
}

// snapshot returns the entries held, oldest first.
func (t *traceRing) snapshot() []traceEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := min(t.next, traceSize)
	out := make([]traceEntry, 0, n)
	for i := t.next - n; i < t.next; i++ {
		out = append(out, t.buf[i%traceSize])
	}
	return out
}

// TracedChange is one change's path through this replica, as /sync/trace reports it: wall
// clock microseconds since the epoch (converted from monotonic readings; comparable across
// processes on one host). RereadSentUs and RereadAnsweredUs are 0 when the registry already
// held the change (no re-read).
type TracedChange struct {
	Seq              int64  `json:"seq"`
	Type             string `json:"type"`
	ID               string `json:"id"`
	CommittedUs      int64  `json:"committed_us"` // the trigger's clock_timestamp (database clock; before the commit)
	ReceivedUs       int64  `json:"received_us"`
	ParsedUs         int64  `json:"parsed_us"`
	DequeuedUs       int64  `json:"dequeued_us"`
	RereadSentUs     int64  `json:"reread_sent_us"`
	RereadAnsweredUs int64  `json:"reread_answered_us"`
	PublishedUs      int64  `json:"published_us"`
}

// Trace is /sync/trace: the last notified changes (at most 4096, oldest first) and their
// per-stage summary.
type Trace struct {
	Changes []TracedChange        `json:"changes"`
	Stages  map[string]StageStats `json:"stages_ms"`
}

// StageStats summarises one stage of the change path over the traced changes, in
// milliseconds.
type StageStats struct {
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
	Samples int     `json:"samples"`
}

// Stage names, in path order (stages_ms keys).
const (
	StageNotify  = "notify"  // trigger's clock_timestamp → notification received (commit, delivery, listener wake-up)
	StageParse   = "parse"   // received → decoded
	StageQueue   = "queue"   // decoded → taken by the applier (hand-off, earlier batches)
	StagePrepare = "prepare" // taken → re-read sent (coalescing, Holds)
	StageReread  = "reread"  // re-read sent → answered (one round trip on the pool)
	StagePublish = "publish" // answered → published (build, copy-on-write shard, publish)
	StageTotal   = "total"   // trigger's clock_timestamp → published
)

// Trace returns the trace of the last notified changes and its per-stage summary.
func (s *Syncer) Trace() Trace {
	es := s.trace.snapshot()
	out := Trace{Changes: make([]TracedChange, 0, len(es)), Stages: stageStats(es)}
	for _, e := range es {
		out.Changes = append(out.Changes, TracedChange{
			Seq: e.seq, Type: string(e.typ), ID: e.id, CommittedUs: e.committed,
			ReceivedUs: monoWallMicros(e.received), ParsedUs: monoWallMicros(e.parsed), DequeuedUs: monoWallMicros(e.dequeued),
			RereadSentUs: monoWallMicros(e.sent), RereadAnsweredUs: monoWallMicros(e.answered), PublishedUs: monoWallMicros(e.published),
		})
	}
	return out
}

// StageStats summarises the traced changes per stage (/sync/lag stages_ms).
func (s *Syncer) StageStats() map[string]StageStats { return stageStats(s.trace.snapshot()) }

func stageStats(es []traceEntry) map[string]StageStats {
	d := map[string][]int64{} // nanoseconds
	add := func(stage string, from, to int64) {
		if from != 0 && to != 0 {
			d[stage] = append(d[stage], max(0, to-from))
		}
	}
	for _, e := range es {
		if e.committed > 0 && e.received != 0 {
			committed := (e.committed - traceBase.UnixMicro()) * 1000 // as a mono reading
			add(StageNotify, committed, e.received)
			add(StageTotal, committed, e.published)
		}
		add(StageParse, e.received, e.parsed)
		add(StageQueue, e.parsed, e.dequeued)
		if e.sent != 0 {
			add(StagePrepare, e.dequeued, e.sent)
			add(StageReread, e.sent, e.answered)
			add(StagePublish, e.answered, e.published)
		}
	}
	out := make(map[string]StageStats, 7)
	for _, st := range []string{StageNotify, StageParse, StageQueue, StagePrepare, StageReread, StagePublish, StageTotal} {
		v := d[st]
		if len(v) == 0 {
			out[st] = StageStats{}
			continue
		}
		slices.Sort(v)
		ms := func(ns int64) float64 { return float64(ns/1000) / 1000 }
		q := func(p float64) int64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
		out[st] = StageStats{P50: ms(q(0.5)), P99: ms(q(0.99)), Max: ms(v[len(v)-1]), Samples: len(v)}
	}
	return out
}
