package call

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResponseID(t *testing.T) {
	for body, want := range map[string]string{
		`{"id":"chatcmpl-1","object":"chat.completion"}`:               "chatcmpl-1",
		`{"type":"message","id":"msg_1","content":[]}`:                 "msg_1",
		`{"object":"list","data":[{"embedding":[0.1]}]}`:               "",
		`{"type":"response.created","response":{"id":"resp_1"}}`:       "resp_1",
		`{"type":"message_start","message":{"id":"msg_2","usage":{}}}`: "msg_2",
		`{"id":5}`: "",
	} {
		require.Equal(t, want, responseID([]byte(body)), body)
	}
	require.Equal(t, "resp_9", streamResponseID([]byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_9\"}}\n\n")))
	require.Equal(t, "chatcmpl-x", streamResponseID([]byte("data: {\"id\":\"chatcmpl-x\",\"choices\":[]}\n\ndata: [DONE]\n\n")))
	require.Equal(t, "", streamResponseID([]byte(": ping\n\ndata: [DONE]\n\n")))
	require.Equal(t, 2, imageCount([]byte(`{"created":1,"data":[{"url":"a"},{"url":"b"}]}`)))
}

// BenchmarkResponseID is the per-call cost of reading the answer's id for the spend log (a
// chat completion answer of ~600 bytes; the id is its first member, as upstreams send it).
func BenchmarkResponseID(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		string(make([]byte, 0)) + `Hello! How can I help you today? This is a longer answer to make the body realistic in size for a typical short reply from the model."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if responseID(body) == "" {
			b.Fatal("no id")
		}
	}
}
