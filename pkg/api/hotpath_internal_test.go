package api

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readBody reads what io.ReadAll reads, whatever Content-Length says, with one allocation
// when it is right.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 3000)
	for _, cl := range []int64{-1, 0, 1, 2999, 3000, 3001, 1 << 20} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		req.ContentLength = cl
		got, err := readBody(req)
		require.NoError(t, err, "Content-Length %d", cl)
		require.Equal(t, body, string(got), "Content-Length %d", cl)
	}
	// a read error is returned with what was read, as io.ReadAll does
	req := httptest.NewRequest("POST", "/", io.MultiReader(strings.NewReader("abc"), errReader{}))
	req.ContentLength = 10
	got, err := readBody(req)
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, "abc", string(got))

	req = httptest.NewRequest("POST", "/", strings.NewReader(body))
	allocs := testing.AllocsPerRun(20, func() {
		req.Body = io.NopCloser(strings.NewReader(body))
		_, _ = readBody(req)
	})
	require.LessOrEqual(t, allocs, 3.0) // the body, and the test's own reader and NopCloser
}

var errBoom = errors.New("boom")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBoom }
