package main

import (
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// logFlushInterval is how long an info or debug line (the access log: one per request) may
// wait in the buffer before it is written.
const logFlushInterval = 100 * time.Millisecond

// logFlushSize is the buffered amount that is written at once, without waiting.
const logFlushSize = 64 << 10

// bufferedLog batches log lines to out: one write every logFlushInterval (or logFlushSize)
// instead of one write system call per request. A warning or error is written at once, with
// everything before it, so lines keep their order and what an operator must see is never
// held back. Flush writes what is buffered (at shutdown). Lines buffered when the process
// is killed or crashes outside a request (its panic goes to stderr directly) are lost: at
// most the last logFlushInterval of info lines.
type bufferedLog struct {
	out     io.Writer
	mu      sync.Mutex // held while appending and while writing (keeps lines in order)
	buf     []byte
	pending bool // a timed flush is scheduled
	timer   *time.Timer
}

func newBufferedLog(out io.Writer) *bufferedLog {
	b := &bufferedLog{out: out, buf: make([]byte, 0, logFlushSize)}
	b.timer = time.AfterFunc(time.Hour, b.Flush)
	b.timer.Stop()
	return b
}

// Write buffers p (one log line) for the next flush.
func (b *bufferedLog) Write(p []byte) (int, error) {
	return b.WriteLevel(zerolog.InfoLevel, p)
}

// WriteLevel buffers p; at warn level and above it writes the buffer at once.
func (b *bufferedLog) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if l >= zerolog.WarnLevel && l != zerolog.NoLevel || len(b.buf) >= logFlushSize {
		return len(p), b.flushLocked()
	}
	if !b.pending {
		b.pending = true
		b.timer.Reset(logFlushInterval)
	}
	return len(p), nil
}

// Flush writes everything buffered.
func (b *bufferedLog) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.flushLocked()
}

func (b *bufferedLog) flushLocked() error {
	b.pending = false
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.out.Write(b.buf)
	if cap(b.buf) > 4*logFlushSize { // one huge line: do not keep its buffer
		b.buf = make([]byte, 0, logFlushSize)
	} else {
		b.buf = b.buf[:0]
	}
	return err
}
