package sidebyside

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// upstreamKey is the API key the fake upstream requires ("Authorization: Bearer sk-up").
const upstreamKey = "sk-up"

// upstream is a zero-latency fake OpenAI upstream: it reads the whole request, checks the key
// and the JSON, and answers with fixed bytes in the real wire format (Chat Completions JSON or
// SSE chat.completion.chunk frames flushed one by one and "data: [DONE]"; an embedding list).
// Unlike itest/fakeupstream it records nothing and builds no answer per request, so that
// its own cost is as small as possible and the same on both paths.
type upstream struct {
	URL   string // http://127.0.0.1:port (the OpenAI base URL is URL+"/v1")
	hs    *http.Server
	chat  []byte
	embed []byte
	sse   [][]byte
}

func startUpstream() (*upstream, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{URL: "http://" + l.Addr().String()}
	u.chat = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-bench",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":14,"completion_tokens":9,"total_tokens":23},"service_tier":"default","system_fingerprint":"fp_bench"}`)
	chunk := func(delta, finish string) []byte {
		return []byte(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-bench","system_fingerprint":"fp_bench",` +
			`"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}` + "\n\n")
	}
	u.sse = [][]byte{chunk(`{"role":"assistant","content":"","refusal":null}`, "null")}
	for _, part := range []string{"Hello!", " How can", " I help", " you today?"} {
		u.sse = append(u.sse, chunk(fmt.Sprintf(`{"content":%q}`, part), "null"))
	}
	u.sse = append(u.sse, chunk(`{}`, `"stop"`), []byte("data: [DONE]\n\n"))
	var vec strings.Builder
	for i := range 256 {
		if i > 0 {
			vec.WriteByte(',')
		}
		fmt.Fprintf(&vec, "%.8f", float64((i*7919)%1000)/1000-0.5)
	}
	u.embed = []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[` + vec.String() +
		`]}],"model":"text-embedding-bench","usage":{"prompt_tokens":5,"total_tokens":5}}`)
	u.hs = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.hs.Serve(l) }()
	return u, nil
}

func (u *upstream) Close() { _ = u.hs.Shutdown(context.Background()) }

func openAIError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "read body: "+err.Error())
		return
	}
	if r.Method != http.MethodPost {
		openAIError(w, http.StatusMethodNotAllowed, "invalid_request_error", "POST only")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+upstreamKey {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	if !gjson.ValidBytes(body) || gjson.GetBytes(body, "model").String() == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "expected a JSON object with a model")
		return
	}
	h := w.Header()
	switch r.URL.Path {
	case "/v1/chat/completions":
		if !gjson.GetBytes(body, "stream").Bool() {
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(u.chat)
			return
		}
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		for _, frame := range u.sse {
			if _, err := w.Write(frame); err != nil {
				return
			}
			f.Flush()
		}
	case "/v1/embeddings":
		h.Set("Content-Type", "application/json")
		_, _ = w.Write(u.embed)
	default:
		openAIError(w, http.StatusNotFound, "invalid_request_error", "unknown path "+r.URL.Path)
	}
}
