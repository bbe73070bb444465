package intern

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// Equal values give one shared string with their content (also across a GC, which may drop
// unique.Make's own entry when no Handle is held), and with more values than slots
// (evictions) or values too long to be cached every answer still equals its input.
func TestEqualValuesShareOneCopy(t *testing.T) {
	t.Parallel()
	few := make([]string, 20) // few: no two of them compete for both their slots
	for i := range few {
		few[i] = fmt.Sprintf(`{"team": "t-%d"}`, i)
	}
	first := make([]string, len(few))
	for i, v := range few {
		first[i] = Bytes([]byte(v))
	}
	runtime.GC()
	for i, v := range few {
		if got := String(strings.Clone(v)); got != v || unsafe.StringData(got) != unsafe.StringData(first[i]) {
			t.Fatalf("String(%q) = %q, a second copy", v, got)
		}
	}
	many := make([]string, 3*Slots)
	for i := range many {
		many[i] = fmt.Sprintf(`{"owner": "user-%d"}`, i)
	}
	many = append(many, strings.Repeat("x", MaxCached+1), "")
	for _, v := range many {
		if got := Bytes([]byte(v)); got != v {
			t.Fatalf("Bytes(%q) = %q", v, got)
		}
		if got := String(v); got != v {
			t.Fatalf("String(%q) = %q", v, got)
		}
	}
}

// A miss copies the bytes: changing the caller's buffer afterwards changes nothing.
func TestBytesDoesNotRetainTheBuffer(t *testing.T) {
	t.Parallel()
	b := []byte("intern-buffer-probe")
	s := Bytes(b)
	copy(b, "XXXXXX")
	if s != "intern-buffer-probe" {
		t.Fatalf("Bytes kept the caller's buffer: %q", s)
	}
}

// BenchmarkString: a repeated value through the cache against unique.Make (the miss path).
func BenchmarkString(b *testing.B) {
	v := strings.Clone("https://api.openai.com/v1/chat/completions")
	String(v)
	b.ReportAllocs()
	for b.Loop() {
		String(v)
	}
}
