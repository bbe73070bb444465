package provider

import (
	"bufio"
	"bytes"
	"io"
	"sync"
)

// sseReader splits a text/event-stream body into frames (WHATWG HTML §9.2 "Server-sent
// events": lines ending in LF, CRLF or CR-LF; a blank line dispatches the event; lines starting
// with ":" are comments; "data" lines are joined with LF). It keeps the raw bytes of each frame
// for verbatim forwarding. Buffers are reused: frame, event and data are valid until the next
// call to next.
type sseReader struct {
	br *bufio.Reader

	frame []byte // raw bytes of the frame, terminating blank line included
	event []byte // value of the "event" field
	data  []byte // joined "data" values
	ndata int    // number of data lines
}

// sseReaders pools readers (each holds a 32 KiB read buffer): a stream takes one and its
// Close gives it back (release).
var sseReaders = sync.Pool{New: func() any { return &sseReader{br: bufio.NewReaderSize(nil, 32<<10)} }}

func newSSEReader(r io.Reader) *sseReader {
	s := sseReaders.Get().(*sseReader)
	s.br.Reset(r)
	return s
}

// maxPooledFrame bounds the frame and data buffers a pooled reader keeps.
const maxPooledFrame = 64 << 10

// release returns s to the pool; s and every slice it returned must not be used after.
func (s *sseReader) release() {
	s.br.Reset(nil)
	if cap(s.frame) > maxPooledFrame || cap(s.data) > maxPooledFrame || cap(s.event) > maxPooledFrame {
		s.frame, s.data, s.event = nil, nil, nil
	}
	s.frame, s.event, s.data, s.ndata = s.frame[:0], s.event[:0], s.data[:0], 0
	sseReaders.Put(s)
}

// next reads the next frame. It returns io.EOF when the body ends with no further frame; a
// frame cut by the end of the body is returned (with a blank line appended) before that.
// Frames holding only blank lines are skipped; comment-only frames are returned (their
// event and data are empty).
func (s *sseReader) Next() error {
	s.frame, s.event, s.data, s.ndata = s.frame[:0], s.event[:0], s.data[:0], 0
	fields := false // saw a non-blank line in this frame
	for {
		lineStart := len(s.frame)
		var err error
		for {
			var chunk []byte
			chunk, err = s.br.ReadSlice('\n')
			s.frame = append(s.frame, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		line := s.frame[lineStart:]
		if err != nil && len(line) == 0 {
			if err == io.EOF && fields {
				s.frame = append(s.frame, '\n', '\n')
				return nil
			}
			return err
		}
		content := bytes.TrimRight(line, "\r\n")
		if len(content) == 0 {
			if err == nil && !fields {
				// Blank line before any field: drop it and keep reading.
				s.frame = s.frame[:lineStart]
				continue
			}
			if fields {
				if err != nil { // body ended on a line without LF
					s.frame = append(s.frame, '\n')
				}
				return nil
			}
			return err
		}
		fields = true
		s.field(content)
		if err != nil { // last line of the body had no newline
			if err == io.EOF {
				s.frame = append(s.frame, '\n', '\n')
				return nil
			}
			return err
		}
	}
}

func (s *sseReader) Current() (raw, event, data []byte) { return s.frame, s.event, s.data }

func (s *sseReader) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value, found := bytes.Cut(line, []byte{':'})
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "event":
		s.event = append(s.event[:0], value...)
	case "data":
		if s.ndata > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.ndata++
	}
}
