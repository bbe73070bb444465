package keys

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactText(t *testing.T) {
	t.Parallel()
	k := Generate()
	for in, want := range map[string]string{
		"/key/" + k + "/regenerate":             "/key/sk-…" + k[len(k)-4:] + "/regenerate",
		"/key/sk-short/regenerate":              "/key/sk-…/regenerate",
		"/v1/chat/completions":                  "/v1/chat/completions",
		"/a2a/task-agent-1":                     "/a2a/task-agent-1",
		"key=sk-1234567890abcd&x=sk-9876543210": "key=sk-…abcd&x=sk-…3210",
		"sk-abc.def~ghi+jkl":                    "sk-…+jkl",
		"":                                      "",
	} {
		require.Equal(t, want, RedactText(in), in)
	}
}

func TestRedactTextWithoutKeyDoesNotAllocate(t *testing.T) {
	p := "/v1/chat/completions"
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = RedactText(p) }))
}

func BenchmarkRedactTextNoKey(b *testing.B) {
	p := "/v1/chat/completions"
	for b.Loop() {
		_ = RedactText(p)
	}
}
