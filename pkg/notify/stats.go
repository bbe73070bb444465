package notify

import (
	"sort"
	"sync"
	"time"
)

// lagWindow keeps (applied at, lag) samples over the last minute: samples[start:] are live.
// Trimming advances start and compacts only once the dead prefix is the larger half, so a
// sample costs O(1) amortized (compacting at every trim copied the whole minute — 12,000
// samples at 200 changes/s — at every change once the window was full).
type lagWindow struct {
	mu      sync.Mutex
	samples []lagSample
	start   int
}

type lagSample struct {
	at  time.Time
	lag time.Duration
}

const lagWindowSpan = 60 * time.Second

func (w *lagWindow) add(at time.Time, lag time.Duration) {
	if lag < 0 {
		lag = 0
	}
	w.mu.Lock()
	w.trim(at)
	if len(w.samples)-w.start < 100000 {
		w.samples = append(w.samples, lagSample{at, lag})
	}
	w.mu.Unlock()
}

func (w *lagWindow) trim(now time.Time) {
	cut := now.Add(-lagWindowSpan)
	for w.start < len(w.samples) && w.samples[w.start].at.Before(cut) {
		w.start++
	}
	if w.start > 0 && w.start >= len(w.samples)-w.start {
		w.samples = append(w.samples[:0], w.samples[w.start:]...)
		w.start = 0
	}
}

// live is the samples of the last minute. w.mu held.
func (w *lagWindow) live() []lagSample { return w.samples[w.start:] }

// LagStats summarises change-written → applied lag over the last 60 s, in milliseconds.
type LagStats struct {
	Last    float64 `json:"last"`
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
	Samples int     `json:"samples"`
}

func (w *lagWindow) stats(now time.Time) LagStats {
	w.mu.Lock()
	w.trim(now)
	live := w.live()
	n := len(live)
	if n == 0 {
		w.mu.Unlock()
		return LagStats{}
	}
	last := live[n-1].lag
	d := make([]time.Duration, n)
	for i, s := range live {
		d[i] = s.lag
	}
	w.mu.Unlock()
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	q := func(p float64) time.Duration { return d[min(n-1, int(p*float64(n)))] }
	return LagStats{Last: ms(last), P50: ms(q(0.5)), P99: ms(q(0.99)), Max: ms(d[n-1]), Samples: n}
}

// Stats is this replica's change-feed state, as /sync/lag reports it (API.md).
type Stats struct {
	Source Source `json:"source"`
	State  State  `json:"state"`
	// Reason says why State is degraded (empty otherwise).
	Reason     string   `json:"reason,omitempty"`
	AppliedSeq int64    `json:"applied_seq"`
	HeadSeq    int64    `json:"head_seq"`
	LagMs      LagStats `json:"lag_ms"`
	// HeartbeatRTTMs is the round trip of the last liveness probe on the change feed's own
	// connection (listen: SELECT 1; logical: a standby status update answered by a keepalive).
	HeartbeatRTTMs float64 `json:"heartbeat_rtt_ms"`
	EventsApplied  int64   `json:"events_applied"`
	// EventsInline counts the notifications of EventsApplied that the listen session applied
	// itself, re-read on its own connection (inline.go; beyond API.md).
	EventsInline  int64 `json:"events_inline"`
	ApplyErrors   int64 `json:"apply_errors"`
	Reconnects    int64 `json:"reconnects"`
	GapsRepaired  int64 `json:"gaps_repaired"`
	DriftRepaired int64 `json:"drift_repaired"`
	// Beyond API.md: notifications dropped on a full buffer (repaired by the poll), and
	// malformed payloads ignored.
	Dropped   int64 `json:"notifications_dropped"`
	Malformed int64 `json:"notifications_malformed"`
	// LivenessProbes counts the liveness probes answered on the change feed's connection
	// (beyond API.md).
	LivenessProbes int64 `json:"liveness_probes"`
	// Watermark is the change-log cursor: the xid8 snapshot xmin the next catch-up reads from.
	Watermark uint64 `json:"watermark"`
	// Reconciles counts full loads taken (initial load, periodic reconcile snapshots).
	Reconciles int64 `json:"reconciles"`
	// Barrier counts notification-barrier rounds (barrier.go).
	Barrier BarrierStats `json:"barrier"`
}

// Stats returns a snapshot of the counters. ApplyErrors is filled by the caller from the
// registries (the Sink interface does not carry it).
func (s *Syncer) Stats() Stats {
	head := s.headSeq.Load()
	applied := s.appliedSeq.Load()
	if applied > head {
		head = applied
	}
	return Stats{
		Source:         s.cfg.Source,
		State:          s.State(),
		Reason:         s.Reason(),
		AppliedSeq:     applied,
		HeadSeq:        head,
		LagMs:          s.lag.stats(time.Now()),
		HeartbeatRTTMs: float64(s.hbRTT.Load()) / 1e6,
		EventsApplied:  s.eventsApp.Load(),
		EventsInline:   s.eventsInline.Load(),
		ApplyErrors:    s.applyErrs.Load(),
		Reconnects:     s.reconnects.Load(),
		GapsRepaired:   s.gaps.Load(),
		DriftRepaired:  s.drift.Load(),
		Dropped:        s.dropped.Load(),
		Malformed:      s.malformed.Load(),
		LivenessProbes: s.probes.Load(),
		Watermark:      s.watermarkPub.Load(),
		Reconciles:     s.reconciles.Load(),
		Barrier:        BarrierStats{Rounds: s.barrierRounds.Load(), Waiters: s.barrierWaiters.Load(), Failed: s.barrierFailed.Load()},
	}
}
