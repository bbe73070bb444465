package registry

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIndexMatchesAMap drives the open-addressing id index through random puts, replacements
// and deletes (small capacities, so clusters wrap around the end of the table and deletes
// shift entries back across it) and checks after every step that it answers exactly like a
// map: every held id found with its entry, every deleted or unknown id missing, the count
// right, and a clone independent of the original.
func TestIndexMatchesAMap(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		x := newIndex[int](rng.IntN(20))
		want := map[string]*Entry[int]{}
		ids := make([]string, 10+rng.IntN(200))
		for i := range ids {
			ids[i] = fmt.Sprint("id-", round, "-", i)
		}
		for step := range 2000 {
			id := ids[rng.IntN(len(ids))]
			h := hashOf(id)
			switch rng.IntN(3) {
			case 0, 1:
				e := &Entry[int]{ID: id, Value: step}
				_, had := want[id]
				if replaced := x.set(e, h); replaced != had {
					t.Fatalf("round %d step %d: set(%s) replaced=%v, map had it: %v", round, step, id, replaced, had)
				}
				want[id] = e
			case 2:
				_, had := want[id]
				if deleted := x.del(id, h); deleted != had {
					t.Fatalf("round %d step %d: del(%s)=%v, map had it: %v", round, step, id, deleted, had)
				}
				delete(want, id)
			}
			if x.len() != len(want) {
				t.Fatalf("round %d step %d: len %d, want %d", round, step, x.len(), len(want))
			}
			if step%50 == 0 {
				checkIndex(t, x, ids, want)
				c := x.clone(1)
				c.set(&Entry[int]{ID: "only-in-clone"}, hashOf("only-in-clone"))
				if x.get("only-in-clone", hashOf("only-in-clone")) != nil {
					t.Fatal("a write to a clone changed the original")
				}
			}
		}
		checkIndex(t, x, ids, want)
	}
}

func checkIndex(t *testing.T, x *index[int], ids []string, want map[string]*Entry[int]) {
	t.Helper()
	for _, id := range append(ids, "never-added") {
		if got := x.get(id, hashOf(id)); got != want[id] {
			t.Fatalf("get(%s) = %v, want %v", id, got, want[id])
		}
	}
	n := 0
	x.all(func(e *Entry[int]) bool {
		if want[e.ID] != e {
			t.Fatalf("all yielded %s, not held", e.ID)
		}
		n++
		return true
	})
	if n != len(want) {
		t.Fatalf("all yielded %d entries, want %d", n, len(want))
	}
}

// BenchmarkIndexGet is a hit in a shard of a million-key registry's size (3906 entries,
// 64-character ids), the key lookup of every request.
func BenchmarkIndexGet(b *testing.B) {
	ids := make([]string, 1_000_000/shards)
	x := newIndex[int](len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("%064x", i*7919)
		x.set(&Entry[int]{ID: ids[i]}, hashOf(ids[i]))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%len(ids)]
		if x.get(id, hashOf(id)) == nil {
			b.Fatal("missing")
		}
	}
}
