// Package intern gives the canonical copy of a string (unique.Make) through a direct-mapped
// cache of recent results, for the strings that many runtime objects repeat: the model names,
// providers and endpoints of deployments, the team, user and organization ids of virtual keys.
//
// Why not unique.Make alone: its concurrent map costs ~400 ns a lookup (a weak-pointer
// dereference and a trie walk) — half of building a key on a cold start of a million keys,
// and ~7 % of a replica's CPU per applied model notification (perf, docs/scale-out.md
// "Propagation") — against a hash and a compare here for the values that repeat.
//
// The cache keeps at most Slots canonical strings alive, only those of ≤ MaxCached bytes
// (≤ 2 MB in all); longer strings go to unique.Make directly. Safe for concurrent use: each
// slot is one atomic pointer, and a lost race only costs a later miss.
package intern

import (
	"hash/maphash"
	"sync/atomic"
	"unique"
	"unsafe"
)

// MaxCached is the longest string (bytes) the cache holds: short values are the repeated
// ones; long ones are mostly distinct and caching them would only evict the short.
const MaxCached = 128

// Slots is the cache's size (a power of two).
const Slots = 1 << 14

var (
	recent [Slots]atomic.Pointer[string]
	seed   = maphash.MakeSeed()
)

// String returns the canonical copy of s: equal to s, and the same backing bytes for every
// equal value ("" stays "").
func String(s string) string {
	if s == "" {
		return ""
	}
	return Bytes(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// Bytes returns the canonical string with b's content; b is not retained (a miss copies it).
func Bytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > MaxCached {
		return unique.Make(string(b)).Value()
	}
	// two slots a value may sit in (fewer collisions for the few thousand values that repeat)
	h := maphash.Bytes(seed, b)
	s1, s2 := &recent[h&(Slots-1)], &recent[(h>>32)&(Slots-1)]
	p1 := s1.Load()
	if p1 != nil && *p1 == string(b) {
		return *p1
	}
	p2 := s2.Load()
	if p2 != nil && *p2 == string(b) {
		return *p2
	}
	v := unique.Make(string(b)).Value()
	if p1 == nil || p2 != nil {
		s1.Store(&v)
	} else {
		s2.Store(&v)
	}
	return v
}
