package keys

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// canonical is unique.Make through a cache: equal bytes give one shared string with their
// content (also across a GC, which may drop unique.Make's own entry when no Handle is held),
// and with more values than slots (evictions) or values too long to be cached every answer
// still equals its input.
func TestCanonicalSharesEqualValues(t *testing.T) {
	t.Parallel()
	few := make([]string, 20) // few: no two of them compete for both their slots
	for i := range few {
		few[i] = fmt.Sprintf(`{"team": "t-%d"}`, i)
	}
	first := make([]string, len(few))
	for i, v := range few {
		first[i] = canonical([]byte(v))
	}
	runtime.GC()
	for i, v := range few {
		if got := canonical([]byte(v)); got != v || unsafe.StringData(got) != unsafe.StringData(first[i]) {
			t.Fatalf("canonical(%q) = %q, a second copy", v, got)
		}
	}
	many := make([]string, 3*len(recent))
	for i := range many {
		many[i] = fmt.Sprintf(`{"owner": "user-%d"}`, i)
	}
	many = append(many, string(make([]byte, maxInternedMetadata+1)))
	for _, v := range many {
		if got := canonical([]byte(v)); got != v {
			t.Fatalf("canonical(%q) = %q", v, got)
		}
	}
}
