// Package gctune gives the Go garbage collector a minimum heap target: a process whose live
// heap is small is collected when its heap reaches MinHeap, not every few megabytes.
//
// Why: the runtime starts a collection when the heap reaches live × (1 + GOGC/100), at least
// 4 MB (runtime/mgcpacer.go, heapMinimum). A replica with a few megabytes live — the usual
// gateway: a few thousand models and keys — collected every 3–4 MB allocated, i.e. every
// ~300 applied notifications, and twenty replicas that apply the same changes collected in
// step: on a shared host each such round stalled every replica's change feed for 20–50 ms,
// the whole p99 of docs/scale-out.md's 20-replica propagation. With a floor of 64 MiB the
// same replicas collect a few times a minute under that load. A large heap (a million keys:
// ~500 MB live) is collected exactly as with GOGC alone: the floor only raises the target
// while live × (1 + GOGC/100) is below it.
//
// It is the runtime's own knob turned after each cycle (debug.SetGCPercent: no stop of the
// world), set from the live heap that cycle measured (runtime/metrics /gc/heap/live:bytes).
// GOGC or GOMEMLIMIT in the environment means the operator tuned the collector: Start then
// does nothing.
//
// Pretouch makes the floor resident (as the JVM's -XX:+AlwaysPreTouch does for its heap): it
// writes one byte of each page of a buffer filling the heap up to 7/8 of the floor (at most
// MaxPretouch), drops it and collects once, so the pages stay mapped and resident, free in the
// Go heap. The gateway calls it once the initial load is built and its garbage handed back to
// the OS (debug.FreeOSMemory, which would release pre-touched pages too). Without it a
// small replica's heap grows into pages it never touched for the first floor's worth of
// allocation — a page fault per 4 KiB, 14 % of a replica's CPU per applied notification in
// docs/scale-out.md's 20-replica propagation profile (perf: clear_page_erms). The runtime's
// scavenger keeps them: it returns free pages to the OS only while the heap's retained memory
// exceeds the heap goal by 10 % (runtime/mgcscavenge.go, retainExtraPercent), and the goal is
// the floor. The cost: the replica's RSS is the floor from the start (it grew to it anyway
// under load), and ~10 ms of page faults at start.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// MaxPercent caps the GC percent the floor sets (a tiny heap would ask for more).
const MaxPercent = 10000

// MaxPretouch caps the memory Pretouch adds (a floor of gigabytes is not made resident at
// start).
const MaxPretouch = 256 << 20

// runtimeMinHeap is the runtime's smallest heap target at GOGC=100 (4 MB).
const runtimeMinHeap = 4 << 20

// Tuner keeps the floor; Stop ends it (the GC percent stays where it was last set).
type Tuner struct {
	minHeap uint64
	base    int // the GC percent without the floor (100: GOGC unset)
	stopped atomic.Bool
	percent atomic.Int64 // the GC percent last set
	sample  []metrics.Sample
}

// Start sets the floor: minHeap bytes (> 0). It returns nil, changing nothing, when GOGC or
// GOMEMLIMIT is set in the environment or minHeap is 0.
func Start(minHeap uint64) *Tuner {
	if minHeap == 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	t := &Tuner{minHeap: minHeap, base: 100, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.tune()
	t.arm()
	return t
}

// Pretouch makes the heap resident up to 7/8 of the floor (at most MaxPretouch more than it
// holds now); nothing when the heap is already that large or t is nil. It runs one
// collection.
func (t *Tuner) Pretouch() {
	if t == nil || t.stopped.Load() {
		return
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	var have uint64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			have += x.Value.Uint64()
		}
	}
	if want := t.minHeap / 8 * 7; want > have {
		pretouch(min(want-have, MaxPretouch))
	}
}

// pageSize is the smallest page the kernel maps (4 KiB on linux/amd64 and arm64; a larger
// page is still touched, only more than once).
const pageSize = 4096

// touched holds the pre-touch buffer while its pages are written, so that the writes are
// not elided.
var touched []byte

// pretouch makes n bytes of the Go heap resident: a buffer of n bytes (fresh, never-touched
// pages: the runtime does not zero them), one write per page, then dropped and collected,
// which returns its pages to the heap's free pages without releasing them to the OS.
func pretouch(n uint64) {
	if n < pageSize {
		return
	}
	touched = make([]byte, n)
	for i := 0; i < len(touched); i += pageSize {
		touched[i] = 1
	}
	touched = nil
	runtime.GC()
}

// Stop ends the tuning after the next collection.
func (t *Tuner) Stop() {
	if t != nil {
		t.stopped.Store(true)
	}
}

// Percent is the GC percent the floor last set.
func (t *Tuner) Percent() int { return int(t.percent.Load()) }

// arm has tune run after the next collection: a cleanup on an object that only that
// collection can find unreachable (runtime.AddCleanup), which re-arms itself.
func (t *Tuner) arm() {
	p := new([16]byte) // 16 bytes: not a tiny allocation, whose cleanup may never run
	runtime.AddCleanup(p, func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// tune sets the GC percent so that the next target is at least minHeap: Percent(live).
func (t *Tuner) tune() {
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := percentFor(live, t.minHeap, t.base)
	if int64(p) != t.percent.Load() {
		debug.SetGCPercent(p)
		t.percent.Store(int64(p))
	}
}

// percentFor is the GC percent whose target, live × (1 + p/100), is at least minHeap, and
// never below base nor above MaxPercent; a live heap under the runtime's 4 MB minimum counts
// as 4 MB (the runtime's first target).
func percentFor(live, minHeap uint64, base int) int {
	live = max(live, runtimeMinHeap)
	if live >= minHeap {
		return base
	}
	p := int((minHeap - live) * 100 / live)
	return min(max(p, base), MaxPercent)
}
