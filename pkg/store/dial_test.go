package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Dial's sockets read and write like the net.Conn they wrap: everything written arrives
// (writes larger than the socket buffer included), io.EOF at the peer's close, a timeout
// error (net.Error, os.ErrDeadlineExceeded) when a deadline passes — pgconn cancels a query's
// context by setting one — and the same over TCP and a unix socket.
func TestDialReadsAndWritesLikeNetConn(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), "s")
			}
			ln, err := net.Listen(network, addr)
			require.NoError(t, err)
			defer ln.Close()
			payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: many partial writes
			echoed, proceed := make(chan []byte, 1), make(chan struct{})
			go func() {
				c, err := ln.Accept()
				if err != nil {
					echoed <- nil
					return
				}
				_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a hang fails the test, never blocks it
				got, _ := io.ReadAll(io.LimitReader(c, int64(len(payload))))
				echoed <- got
				select { // silent past the client's read deadline
				case <-proceed:
				case <-time.After(10 * time.Second):
				}
				_, _ = c.Write([]byte("bye"))
				c.Close()
			}()
			c, err := Dial(&net.Dialer{})(context.Background(), network, ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			require.IsType(t, &rawConn{}, c)
			require.NoError(t, c.SetWriteDeadline(time.Now().Add(10*time.Second)))
			n, err := c.Write(payload)
			require.NoError(t, err)
			require.Equal(t, len(payload), n)
			select {
			case got := <-echoed:
				require.Equal(t, payload, got)
			case <-time.After(10 * time.Second):
				t.Fatal("the peer did not receive the payload")
			}

			require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
			buf := make([]byte, 16)
			_, err = c.Read(buf)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			require.True(t, ne.Timeout(), "a passed deadline reads as a timeout: %v", err)
			require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)

			close(proceed)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			got, err := io.ReadAll(c)
			require.NoError(t, err, "io.ReadAll ends at io.EOF")
			require.Equal(t, "bye", string(got))
			n, err = c.Read(buf)
			require.Zero(t, n)
			require.ErrorIs(t, err, io.EOF)
		})
	}
}

// A read or write on a closed socket fails with net.ErrClosed, as on a net.Conn.
func TestDialClosedSocket(t *testing.T) {
	c := dialPeer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	require.NoError(t, c.Close())
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = c.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
}

// Reads and writes on Dial's sockets allocate nothing (the syscall closures are made once).
func TestDialReadWriteAllocateNothing(t *testing.T) {
	c := dialPeer(t, func(c net.Conn) { _, _ = io.Copy(c, c) }) // echo
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	msg, buf := []byte("ping"), make([]byte, 4)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Write(msg); err != nil {
			panic(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
}

// dialPeer dials, with Dial, a loopback TCP peer that runs serve on its end (within 10 s);
// both ends are closed when the test ends.
func dialPeer(t *testing.T, serve func(net.Conn)) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			serve(c)
		}
	}()
	c, err := Dial(&net.Dialer{})(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}
