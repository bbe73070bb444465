package call

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// x-litellm-response-cost is printed as Python's str(float) (LiteLLM: str(response_cost)).
func TestPyFloat(t *testing.T) {
	for f, want := range map[float64]string{0: "0.0", 2: "2.0", 0.00015: "0.00015", 1.5e-05: "1.5e-05", 1e-05: "1e-05",
		0.30000000000000004: "0.30000000000000004", 1234567: "1234567.0", 1e16: "1e+16"} {
		require.Equal(t, want, pyFloat(f), "%v", f)
	}
}

// The call id and its header slice share one allocation; ids are distinct.
func TestNewCallID(t *testing.T) {
	s := &IDs{prefix: "r1-abc-"}
	id, h := s.newCallID()
	require.Equal(t, []string{id}, h)
	id2, _ := s.newCallID()
	require.NotEqual(t, id, id2)
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _, _ = s.newCallID() }))
}
