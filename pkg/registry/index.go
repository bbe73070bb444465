package registry

import "hash/maphash"

// index is one shard's id index: an open-addressing hash table (linear probing) of entry
// pointers, keyed by each entry's own ID. It holds no key of its own: the id is stored once, in
// the entry (and a key's id shares its string with keys.Key.Token), so a million keys' index
// costs about 12 bytes per key (a pointer and a control byte per slot, at most 7/8 full)
// instead of the 48 of a map[string]*Entry (a string header and a pointer per slot, at the
// load a size hint gives; measured with 1,000,000 64-character ids in 256 maps).
//
// A lookup hashes the id once (hashOf: its low byte picks the shard, higher bits the home slot
// and the control byte's tag), scans control bytes for the tag and compares the id only on a
// tag match, so a miss rarely reads an entry. An index is copied on write as two flat slices
// (a memmove, not a map rebuild). Deletion shifts the following entries of the cluster back
// (no tombstones), so probe lengths do not grow with churn.
type index[T any] struct {
	ctrl []uint8 // per slot: 0 empty, else 0x80 | the hash's top 7 bits
	ents []*Entry[T]
	n    int
}

// hashOf is the hash every index and shard decision uses: shard = h % shards, home slot and
// tag from the bits above.
func hashOf(id string) uint64 { return maphash.String(seed, id) }

func tagOf(h uint64) uint8 { return 0x80 | uint8(h>>57) }

// home is the slot a hash starts probing at: bits 16..47 scaled to the capacity (a multiply,
// not a modulo; any capacity works).
func (x *index[T]) home(h uint64) int { return int(uint64(uint32(h>>16)) * uint64(len(x.ctrl)) >> 32) }

// newIndex returns an empty index sized for n entries (at most 3/4 full).
func newIndex[T any](n int) *index[T] {
	c := max(8, n+n/3+1)
	return &index[T]{ctrl: make([]uint8, c), ents: make([]*Entry[T], c)}
}

// get returns the entry with id (h = hashOf(id)), or nil.
func (x *index[T]) get(id string, h uint64) *Entry[T] {
	if x == nil || x.n == 0 {
		return nil
	}
	tag, c := tagOf(h), len(x.ctrl)
	for i := x.home(h); ; {
		switch x.ctrl[i] {
		case 0:
			return nil
		case tag:
			if e := x.ents[i]; e.ID == id {
				return e
			}
		}
		if i++; i == c {
			i = 0
		}
	}
}

// clone returns a copy that can be written without touching x (x may be nil: an empty index).
func (x *index[T]) clone(extra int) *index[T] {
	if x == nil {
		return newIndex[T](extra)
	}
	if (x.n+extra)*8 > len(x.ctrl)*7 {
		return x.rehash(x.n + extra)
	}
	return &index[T]{ctrl: append([]uint8(nil), x.ctrl...), ents: append([]*Entry[T](nil), x.ents...), n: x.n}
}

// rehash returns a copy of x sized for n entries.
func (x *index[T]) rehash(n int) *index[T] {
	y := newIndex[T](max(n, x.n))
	for i, e := range x.ents {
		if x.ctrl[i] != 0 {
			y.insert(e, hashOf(e.ID))
		}
	}
	return y
}

// set puts e in the index, replacing the entry with the same ID; reports whether it replaced
// one. The index grows when it would be more than 7/8 full.
func (x *index[T]) set(e *Entry[T], h uint64) (replaced bool) {
	tag, c := tagOf(h), len(x.ctrl)
	for i := x.home(h); ; {
		switch x.ctrl[i] {
		case 0:
			if (x.n+1)*8 > c*7 {
				*x = *x.rehash(x.n + 1 + x.n/2)
				x.insert(e, h)
				return false
			}
			x.ctrl[i], x.ents[i] = tag, e
			x.n++
			return false
		case tag:
			if x.ents[i].ID == e.ID {
				x.ents[i] = e
				return true
			}
		}
		if i++; i == c {
			i = 0
		}
	}
}

// insert adds e, known to be absent, to an index with room for it.
func (x *index[T]) insert(e *Entry[T], h uint64) {
	c := len(x.ctrl)
	i := x.home(h)
	for x.ctrl[i] != 0 {
		if i++; i == c {
			i = 0
		}
	}
	x.ctrl[i], x.ents[i] = tagOf(h), e
	x.n++
}

// del removes the entry with id; reports whether there was one. The entries after it in its
// cluster that would no longer be found from their home slot move back (backward-shift
// deletion).
func (x *index[T]) del(id string, h uint64) bool {
	tag, c := tagOf(h), len(x.ctrl)
	i := x.home(h)
	for {
		if x.ctrl[i] == 0 {
			return false
		}
		if x.ctrl[i] == tag && x.ents[i].ID == id {
			break
		}
		if i++; i == c {
			i = 0
		}
	}
	x.n--
	for j := i; ; {
		if j++; j == c {
			j = 0
		}
		if x.ctrl[j] == 0 {
			break
		}
		// the entry at j may fill the hole at i when its home slot is not in (i, j]
		k := x.home(hashOf(x.ents[j].ID))
		if (i <= j && (k <= i || k > j)) || (i > j && k <= i && k > j) {
			x.ctrl[i], x.ents[i] = x.ctrl[j], x.ents[j]
			i = j
		}
	}
	x.ctrl[i], x.ents[i] = 0, nil
	return true
}

// all calls fn for every entry until fn returns false; reports whether it ran to the end.
func (x *index[T]) all(fn func(*Entry[T]) bool) bool {
	if x == nil {
		return true
	}
	for i, e := range x.ents {
		if x.ctrl[i] != 0 && !fn(e) {
			return false
		}
	}
	return true
}

func (x *index[T]) len() int {
	if x == nil {
		return 0
	}
	return x.n
}
