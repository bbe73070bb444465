package notify

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"lockstep/pkg/store"
)

func (s *Syncer) apply(ctx context.Context) {
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	batch := make([]event, 0, 8192)
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-s.catchUp:
			s.applyMu.Lock()
			err := s.catchUpNow(ctx, req.mode)
			s.applyMu.Unlock()
			req.done <- err
		case <-s.bar.applied:
			s.applyMu.Lock()
			s.completeBarriers(ctx, batch)
			s.applyMu.Unlock()
		case ev := <-s.events:
			dequeued := mono()
			batch = append(batch[:0], ev)
		drain:
			for len(batch) < cap(batch) {
				select {
				case ev := <-s.events:
					batch = append(batch, ev)
				default:
					break drain
				}
			}
			s.applyMu.Lock()
			s.applyEvents(ctx, batch, dequeued, nil)
			s.applyMu.Unlock()
		case <-poll.C:
			if st := s.State(); st != StateStreaming && st != StateDegraded {
				continue
			}
			s.applyMu.Lock()
			s.poll(ctx)
			s.applyMu.Unlock()
		case <-s.kick:
			// notifications were dropped, or re-reads are pending: repair now, not at the
			// next tick; while (re)connecting, the catch-up will do it, try again later
			if st := s.State(); st == StateStreaming || st == StateDegraded {
				s.applyMu.Lock()
				s.poll(ctx)
				s.applyMu.Unlock()
			} else {
				time.AfterFunc(100*time.Millisecond, s.kickNow)
			}
		}
	}
}

// applyEvents coalesces a batch of notifications per type and id (highest version wins),
// re-reads the ids in one query per type and applies the result. dequeued is the mono
// reading when the applier took the batch (the trace, trace.go); on is the connection the
// re-reads run on: nil for the pool, the listen connection for an inline apply (inline.go).
// The caller holds applyMu. Returns the first re-read error (its changes are left pending).
func (s *Syncer) applyEvents(ctx context.Context, batch []event, dequeued int64, on *pgx.Conn) error {
	start := time.Now()
	want := map[store.ObjectType]map[string]change{}
	var maxSeq int64
	for _, ev := range batch {
		if ev.Seq > maxSeq {
			maxSeq = ev.Seq
		}
		if ev.Op == "truncate" {
			if sink := s.sinks[ev.Type]; sink != nil {
				sink.Truncate(ev.V)
			}
			continue
		}
		addChange(want, ev.Type, ev.ID, ev.V, ev.Seq, ev.Op)
	}
	var times []stageTimes
	var firstErr error
	for typ, ids := range want {
		if _, err := s.reread(ctx, typ, ids, on); err != nil {
			s.log.Warn().Err(err).Str("type", string(typ)).Msg("re-read failed; will retry")
			s.addPending(typ, ids)
			if on != nil {
				s.kickNow() // the applier retries on the pool now, not at the next poll
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if s.rr.sent != 0 {
			times = append(times, s.rr)
		}
	}
	s.trace.addBatch(batch, dequeued, times, mono())
	now := time.Now()
	for _, ev := range batch {
		if ev.TS > 0 {
			s.lag.add(now, now.Sub(time.UnixMicro(ev.TS)))
		}
	}
	s.eventsApp.Add(int64(len(batch)))
	traceApplied(start, batch) // one change.apply span per change, when tracing (tracing.go)
	if maxSeq > s.appliedSeq.Load() {
		s.appliedSeq.Store(maxSeq)
	}
	return firstErr
}

// change is what the feed knows of one id: the newest change's version and whether it was a
// delete.
type change struct {
	v   int64
	seq int64 // its change-log row
	del bool
}

func addChange(want map[store.ObjectType]map[string]change, typ store.ObjectType, id string, v, seq int64, op string) {
	m := want[typ]
	if m == nil {
		m = map[string]change{}
		want[typ] = m
	}
	if v > m[id].v {
		m[id] = change{v: v, seq: seq, del: op == "delete"}
	}
}

// reread loads the ids the sink does not already hold and applies them version-guarded.
// Absent ids are applied as deletes when the change was a delete and the row is gone, or when
// the row is visible but not loadable (a guardrail moved out of 'active'). A change whose
// version is not visible yet — the row missing after an insert, or older than the change after
// an update or delete — was either superseded since (a later change follows) or, with logical
// decoding, committed but not yet visible to other sessions (PostgreSQL makes a commit
// visible just after its WAL record is flushed and streamed): the logical source re-reads
// those briefly and leaves the rest to the next poll; it never tombstones them.
// Returns how many registry entries changed.
func (s *Syncer) reread(ctx context.Context, typ store.ObjectType, ids map[string]change, on *pgx.Conn) (int, error) {
	s.rr = stageTimes{typ: typ}
	sink := s.sinks[typ]
	if sink == nil {
		return 0, nil
	}
	need := make([]string, 0, len(ids))
	for id, c := range ids {
		if !sink.Holds(id, c.v) {
			need = append(need, id)
		}
	}
	changed := 0
	for attempt := 0; len(need) > 0; attempt++ {
		// Logical source: first ask which of the changes are visible. A change visible
		// before the re-read is fully reflected by it, so a row still absent or older then
		// means a later change (delete, truncate) superseded it; only changes not visible
		// yet are retried. (Asked before, not after, the re-read: a commit becoming visible
		// between the two must not pass for superseded.)
		var committed map[int64]bool
		if s.src.lateVisibility() && attempt > 0 {
			seqs := make([]int64, 0, len(need))
			for _, id := range need {
				seqs = append(seqs, ids[id].seq)
			}
			vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			vis, err := s.cfg.Store.VisibleChanges(vctx, seqs)
			cancel()
			if err != nil {
				return changed, err
			}
			committed = vis
		}
		if attempt == 0 {
			s.rr.sent = mono()
		}
		rows, filtered, err := s.reload(ctx, typ, need, on)
		if err != nil {
			return changed, err
		}
		if attempt == 0 {
			s.rr.answered = mono()
		}
		// seen: the row is visible at (at least) the version the change reported
		seen := make(map[string]bool, len(rows)+len(filtered))
		for _, r := range rows {
			seen[r.ID] = r.Version >= ids[r.ID].v
		}
		absent := map[string]int64{}
		for _, r := range filtered {
			if r.Version >= ids[r.ID].v {
				seen[r.ID] = true
				absent[r.ID] = r.Version
			}
		}
		var invisible []string
		for _, id := range need {
			switch {
			case seen[id]:
			case ids[id].del && !visible(rows, filtered, id):
				absent[id] = ids[id].v
			default:
				// not visible yet (logical decoding) at the change's version: the older
				// version read, if any, is applied below; the change itself is retried
				invisible = append(invisible, id)
			}
		}
		changed += sink.Apply(rows, absent)
		if attempt == 0 {
			s.rr.published = mono()
		}
		need = invisible
		if len(need) == 0 || !s.src.lateVisibility() {
			break
		}
		need = slices.DeleteFunc(need, func(id string) bool { return committed[ids[id].seq] })
		if len(need) == 0 {
			break
		}
		if attempt == 10 {
			// still not visible after ~20 ms (e.g. a commit waiting on synchronous
			// replication): retry from the applier loop shortly, without blocking it
			s.addPending(typ, pick(ids, need))
			time.AfterFunc(25*time.Millisecond, s.kickNow)
			break
		}
		select {
		case <-ctx.Done():
			return changed, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return changed, nil
}

// visible reports whether id was returned by a re-read, loadable or not.
func visible(rows, filtered []store.Row, id string) bool {
	for _, r := range rows {
		if r.ID == id {
			return true
		}
	}
	for _, r := range filtered {
		if r.ID == id {
			return true
		}
	}
	return false
}

func pick(ids map[string]change, keys []string) map[string]change {
	out := make(map[string]change, len(keys))
	for _, k := range keys {
		out[k] = ids[k]
	}
	return out
}

func (s *Syncer) addPending(typ store.ObjectType, ids map[string]change) {
	m := s.pending[typ]
	if m == nil {
		m = map[string]change{}
		s.pending[typ] = m
	}
	for id, c := range ids {
		if cur, ok := m[id]; !ok || c.v > cur.v {
			m[id] = c
		}
	}
}

// rereadChunk bounds the ids one re-read query carries: a catch-up after a bulk insert (a
// million ids) reads them in queries of this many, each within its own 5 s, and applies them
// together (one build on every core, one publish).
const rereadChunk = 10000

// reload is Store.Reload of ids in chunks of rereadChunk, each within 5 s; on a connection of
// its own (on != nil, the listen session's) Store.ReloadOn within probeTimeout, so an inline
// re-read never holds the listen session longer than a liveness probe may.
func (s *Syncer) reload(ctx context.Context, typ store.ObjectType, ids []string, on *pgx.Conn) (rows, filtered []store.Row, err error) {
	for lo := 0; lo < len(ids); lo += rereadChunk {
		chunk := ids[lo:min(lo+rereadChunk, len(ids))]
		var r, f []store.Row
		var err error
		if on != nil {
			r, f, err = s.reloadInline(ctx, on, typ, chunk)
		} else {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r, f, err = s.cfg.Store.Reload(rctx, typ, chunk)
			cancel()
		}
		if err != nil {
			return nil, nil, err
		}
		if rows == nil {
			rows, filtered = r, f
			continue
		}
		rows, filtered = append(rows, r...), append(filtered, f...)
	}
	return rows, filtered, nil
}
