package format

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// StreamError finds the error event among a stream's frames in each route's shape, and
// nothing in ordinary events (a delta quoting "error" included).
func TestStreamError(t *testing.T) {
	t.Parallel()
	chunk := "data: {\"choices\":[{\"delta\":{\"content\":\"the \\\"error\\\" word\"}}]}\n\n"
	for _, c := range []struct {
		f      Format
		data   string
		status int
		code   string
		msg    string
	}{
		{FormatChat, chunk + "data: {\"error\": {\"message\": \"boom\", \"type\": \"server_error\", \"param\": null, \"code\": null}}\n\n", 500, "", "boom"},
		{FormatChat, "data: {\"error\": {\"message\": \"slow down\", \"code\": 429}}\n\n", 429, "", "slow down"},
		{FormatChat, "data: {\"error\": {\"message\": \"too long\", \"code\": \"context_length_exceeded\"}}\n\n", 500, "context_length_exceeded", "too long"},
		{FormatChat, string(ErrorEvent(FormatChat, 503, "rendered")), 503, "", "rendered"},
		{FormatMessages, "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n", 529, "", "Overloaded"},
		{FormatResponses, string(ErrorEvent(FormatResponses, 502, "gone")), 502, "", "gone"},
		{FormatMessages, "event: error\r\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow\"}}\r\n\r\n", 429, "", "slow"},
	} {
		at, end, ue := StreamError(c.f, []byte(c.data))
		require.NotNil(t, ue, c.data)
		require.Equal(t, c.status, ue.Status, c.data)
		require.Equal(t, c.code, ue.Code, c.data)
		require.Equal(t, c.msg, ue.Message, c.data)
		require.Equal(t, len(c.data), end, c.data)
		if strings.HasPrefix(c.data, chunk) {
			require.Equal(t, len(chunk), at)
		}
	}
	for _, d := range []string{chunk, "data: [DONE]\n\n", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"error\"}}\n\n"} {
		_, _, ue := StreamError(FormatChat, []byte(d))
		require.Nil(t, ue, d)
		_, _, ue = StreamError(FormatMessages, []byte(d))
		require.Nil(t, ue, d)
	}
}

// BenchmarkStreamErrorChunk is the cost StreamError adds to each ordinary event a stream writes.
func BenchmarkStreamErrorChunk(b *testing.B) {
	data := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello there, how are you"},"finish_reason":null}]}` + "\n\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ue := StreamError(FormatChat, data); ue != nil {
			b.Fatal(ue)
		}
	}
}
