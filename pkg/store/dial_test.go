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
			echoed := make(chan []byte, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					echoed <- nil
					return
				}
				got, _ := io.ReadAll(io.LimitReader(c, int64(len(payload))))
				echoed <- got
				time.Sleep(300 * time.Millisecond) // silent past the client's deadline
				_, _ = c.Write([]byte("bye"))
				c.Close()
			}()
			c, err := Dial(&net.Dialer{})(context.Background(), network, ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			require.IsType(t, &rawConn{}, c)
			n, err := c.Write(payload)
			require.NoError(t, err)
			require.Equal(t, len(payload), n)
			require.Equal(t, payload, <-echoed)

			require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
			buf := make([]byte, 16)
			_, err = c.Read(buf)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			require.True(t, ne.Timeout(), "a passed deadline reads as a timeout: %v", err)
			require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)

			require.NoError(t, c.SetReadDeadline(time.Time{}))
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := Dial(&net.Dialer{})(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = c.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
}

// A read and a write on a Dial socket allocate nothing, as on a net.Conn: they run for every
// message of every DB connection (pool and change feed).
func TestDialReadAndWriteAllocateNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c) // echo
	}()
	c, err := Dial(&net.Dialer{})(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	b := make([]byte, 8)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Write(b); err != nil {
			panic(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs, "allocations per write and read")
}
