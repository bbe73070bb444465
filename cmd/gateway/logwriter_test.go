package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int // writes
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Info lines are batched into one write; a warning is written at once with everything before
// it, in order; a buffered line is written within the flush interval without any other write.
func TestBufferedLog(t *testing.T) {
	out := &lockedBuf{}
	b := newBufferedLog(out)
	log := zerolog.New(b)
	log.Info().Msg("one")
	log.Info().Msg("two")
	log.Warn().Msg("three")
	got := out.String()
	if !strings.Contains(got, `"one"`) || strings.Index(got, `"one"`) > strings.Index(got, `"two"`) || strings.Index(got, `"two"`) > strings.Index(got, `"three"`) {
		t.Fatalf("a warning writes the lines before it, in order: %q", got)
	}
	if out.n != 1 {
		t.Fatalf("three lines, %d writes (want 1)", out.n)
	}

	log.Info().Msg("later")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `"later"`) {
		if time.Now().After(deadline) {
			t.Fatal("a buffered info line was never written")
		}
		time.Sleep(5 * time.Millisecond)
	}

	big := strings.Repeat("x", logFlushSize)
	log.Info().Msg(big)
	if !strings.Contains(out.String(), big) {
		t.Fatal("a full buffer is written at once")
	}
	log.Info().Msg("last")
	b.Flush()
	if !strings.HasSuffix(out.String(), "\"last\"}\n") {
		t.Fatalf("Flush writes what is buffered: %q", out.String()[len(out.String())-40:])
	}
}
