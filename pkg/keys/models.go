package keys

import (
	"strings"
	"sync"

	"unsafe"

	"lockstep/pkg/intern"
)

// Interning of the models lists keys hold. Keys are many (a million with per-user and
// per-end-user keys) and their models lists few: a list is held once, shared read-only by
// every key with the same list (a Key is immutable, so nobody writes it), and each model name
// is a canonical string (intern.String).

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
		l[i] = intern.String(m)
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
		v := intern.Bytes(m)
		return unsafe.Slice(unsafe.StringData(v), len(v))
	case cap(m) > len(m):
		return append([]byte(nil), m...)
	}
	return m
}

// maxInternedMetadata is the size up to which metadata is interned: small objects are the
// repeated ones; large ones are mostly distinct and interning them would only cost the lookup.
const maxInternedMetadata = intern.MaxCached

var emptyObject = []byte("{}")
