package keys

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"unique"
	"unsafe"
)

// Interning of the models lists keys hold. Keys are many (a million with per-user and
// per-end-user keys) and their models lists few: a list is held once, shared read-only by
// every key with the same list (a Key is immutable, so nobody writes it), and each model name
// is a canonical string (unique.Make).

// maxInterned bounds the table; lists beyond it are kept per key (a workload of mostly
// distinct lists gains nothing from interning, and the table never shrinks).
const maxInterned = 1 << 16

var interned struct {
	sync.Mutex
	lists map[string][]string
}

// internModels returns the shared copy of models (nil for an empty list).
func internModels(models []string) []string {
	if len(models) == 0 {
		return nil
	}
	k := strings.Join(models, "\x00")
	interned.Lock()
	defer interned.Unlock()
	if l, ok := interned.lists[k]; ok {
		return l
	}
	if interned.lists == nil {
		interned.lists = map[string][]string{}
	}
	l := make([]string, len(models))
	for i, m := range models {
		l[i] = unique.Make(m).Value()
	}
	if len(interned.lists) < maxInterned {
		interned.lists[k] = l
	}
	return l
}

// compactMetadata returns metadata, sharing one "{}" for the common empty object and one copy
// of each small metadata object many keys repeat (an owner, a tier: a million keys carry a few
// thousand distinct ones), read-only like every Key field.
func compactMetadata(m []byte) []byte {
	switch {
	case len(m) == 0:
		return nil
	case string(m) == "{}":
		return emptyObject
	case len(m) <= maxInternedMetadata:
		v := canonical(m)
		return unsafe.Slice(unsafe.StringData(v), len(v))
	case cap(m) > len(m):
		return append([]byte(nil), m...)
	}
	return m
}

// maxInternedMetadata is the size up to which metadata is interned: small objects are the
// repeated ones; large ones are mostly distinct and interning them would only cost the lookup.
const maxInternedMetadata = 128

// intern returns the canonical copy of s (unique.Make): team, user and organization ids repeat
// across many keys.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return canonical(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// canonical returns unique.Make(string(b)).Value() through a direct-mapped cache of recent
// results: a cold start interns a million keys' metadata, and unique.Make's concurrent map
// cost ~400 ns a lookup (a weak-pointer deref and a trie walk; half of building a key) against
// a hash and a compare here for the values that repeat. The cache keeps at most len(recent)
// canonical strings alive (only those of ≤ maxInternedMetadata bytes: ≤ 2 MB).
func canonical(b []byte) string {
	if len(b) > maxInternedMetadata {
		return unique.Make(string(b)).Value()
	}
	// two slots a value may sit in (fewer collisions for the few thousand values that repeat)
	h := maphash.Bytes(recentSeed, b)
	s1, s2 := &recent[h&(uint64(len(recent))-1)], &recent[(h>>32)&(uint64(len(recent))-1)]
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

var (
	recent     [1 << 14]atomic.Pointer[string]
	recentSeed = maphash.MakeSeed()
)

var emptyObject = []byte("{}")
