package store

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Dial returns a pgconn DialFunc (pgconn.Config.DialFunc) that dials with d and wraps the
// socket so that its reads and writes are raw read(2)/write(2) calls on the non-blocking
// socket, waiting for readiness in Go's netpoller as net.Conn does (syscall.RawConn's Read
// and Write: deadlines, and so pgconn's context cancellation, work unchanged).
//
// Why: a net.Conn read or write is a syscall.Read/Write, which enters the runtime's syscall
// state (runtime.entersyscall); when every P of the process was idle, that wakes the
// runtime's sysmon thread (runtime/proc.go, entersyscallWakeSysmon), which then polls every
// 20 µs for the next millisecond (its "syscallWake" reset). A replica that sleeps between
// notifications woke sysmon two or three times per notification: 10 thread wake-ups and
// 0.29 ms of CPU per notification with 20 replicas on 2 cores, against 3.7 and 0.17 ms with
// this dialer (docs/scale-out.md). A read or write on a non-blocking socket never blocks, so
// it needs no syscall state. Sockets that are not syscall.Conn are returned as dialed.
func Dial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sc, ok := c.(syscall.Conn)
		if !ok {
			return c, nil
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return c, nil
		}
		return newRawConn(c, rc), nil
	}
}

// rawConn is a dialed socket whose Read and Write are raw syscalls (see Dial); every other
// method is the socket's own. Neither allocates: each direction has its syscall closure made
// once (rawOp), used under that direction's lock (a net.Conn may be read and written at once).
type rawConn struct {
	net.Conn
	rc     syscall.RawConn
	rd, wr rawOp
}

// rawOp is one direction's syscall: trap (SYS_READ or SYS_WRITE) on buf, once the socket is
// ready; n and errno are its outcome.
type rawOp struct {
	mu    sync.Mutex
	trap  uintptr
	buf   []byte
	n     uintptr
	errno syscall.Errno
	fn    func(fd uintptr) bool // o.run, bound once
}

func newRawConn(c net.Conn, rc syscall.RawConn) *rawConn {
	r := &rawConn{Conn: c, rc: rc}
	r.rd.trap, r.wr.trap = syscall.SYS_READ, syscall.SYS_WRITE
	r.rd.fn, r.wr.fn = r.rd.run, r.wr.run
	return r
}

// run is the syscall.RawConn callback: false (wait for readiness and call again) on EAGAIN.
func (o *rawOp) run(fd uintptr) bool {
	for {
		o.n, _, o.errno = syscall.RawSyscall(o.trap, fd, uintptr(unsafe.Pointer(&o.buf[0])), uintptr(len(o.buf)))
		if o.errno != syscall.EINTR {
			return o.errno != syscall.EAGAIN
		}
	}
}

func (c *rawConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Read reads once from the socket, like net.Conn's Read: io.EOF at end of stream, a
// *net.OpError otherwise (a timeout when a deadline passed, net.ErrClosed once closed).
func (c *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	o := &c.rd
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = b
	err := c.rc.Read(o.fn)
	o.buf = nil
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case o.errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", o.errno))
	case o.n == 0:
		return 0, io.EOF
	}
	return int(o.n), nil
}

// Write writes all of b unless an error (a *net.OpError, as net.Conn's Write) stops it; it
// returns how much was written.
func (c *rawConn) Write(b []byte) (int, error) {
	o := &c.wr
	o.mu.Lock()
	defer o.mu.Unlock()
	defer func() { o.buf = nil }()
	done := 0
	for done < len(b) {
		o.buf = b[done:]
		if err := c.rc.Write(o.fn); err != nil {
			return done, c.opError("write", err)
		}
		if o.errno != 0 {
			return done, c.opError("write", os.NewSyscallError("write", o.errno))
		}
		done += int(o.n)
	}
	return done, nil
}
