package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// GATEWAY_GC_MIN_HEAP_MB: 64 MiB unless set; 0 turns the floor off; anything but a whole
// number of MiB from 0 to 65536 is refused with the variable's name and the value.
func TestGCMinHeap(t *testing.T) {
	t.Setenv("GATEWAY_GC_MIN_HEAP_MB", "")
	v, err := gcMinHeap()
	require.NoError(t, err)
	require.Equal(t, uint64(64<<20), v)
	for raw, want := range map[string]uint64{"0": 0, "256": 256 << 20, " 8 ": 8 << 20} {
		t.Setenv("GATEWAY_GC_MIN_HEAP_MB", raw)
		v, err := gcMinHeap()
		require.NoError(t, err, raw)
		require.Equal(t, want, v, raw)
	}
	for _, raw := range []string{"-1", "64MB", "1e3", "65537", "0x10"} {
		t.Setenv("GATEWAY_GC_MIN_HEAP_MB", raw)
		_, err := gcMinHeap()
		require.EqualError(t, err, `GATEWAY_GC_MIN_HEAP_MB: want a whole number of MiB from 0 (off) to 65536, got "`+raw+`"`)
	}
}
