package fakeupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// APIOllama is Ollama's native chat API.
const APIOllama API = "ollama"

// StartOllama starts a fake Ollama server: POST /api/chat
// (https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion), streamed
// by default as newline-delimited JSON objects, the last one "done": true with done_reason and
// prompt_eval_count/eval_count; "stream": false gives one object. It checks what Ollama checks:
// a JSON body with "model" and "messages" (400 {"error": "…"} otherwise), and it honours
// options.num_predict by cutting the answer to that many words (done_reason "length"). It also
// serves POST /api/embed (embed_native.go).
func StartOllama(t testing.TB, opts ...Option) *Server {
	s := Start(t, opts...)
	s.native = s.ollama
	return s
}

// truncate cuts text to at most max words (max <= 0: no limit) and reports whether it did.
func truncate(text string, limit int64) (string, bool) {
	words := strings.Fields(text)
	if limit <= 0 || int64(len(words)) <= limit {
		return text, false
	}
	return strings.Join(words[:limit], " "), true
}

func writeOllamaError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error": msg})
}

func (s *Server) ollama(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.URL.Path == "/api/embed" && r.Method == http.MethodPost {
		s.ollamaEmbed(w, body)
		return
	}
	if r.URL.Path != "/api/chat" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if code := int(s.status.Load()); code != 0 && (code < 200 || code > 299) {
		writeOllamaError(w, code, fmt.Sprintf("fake upstream error %d", code))
		return
	}
	if !gjson.ValidBytes(body) {
		writeOllamaError(w, http.StatusBadRequest, "invalid character in request body")
		return
	}
	j := gjson.ParseBytes(body)
	model := j.Get("model").Str
	if model == "" {
		writeOllamaError(w, http.StatusBadRequest, "model is required")
		return
	}
	if !j.Get("messages").IsArray() {
		writeOllamaError(w, http.StatusBadRequest, "messages is required")
		return
	}
	in := ReplyInput{API: APIOllama, Path: r.URL.Path, Model: model, Text: lastUserText(j.Get("messages")), Body: body, Header: r.Header}
	in.Stream = !j.Get("stream").Exists() || j.Get("stream").Bool()
	text, cut := truncate(s.cfg.reply(in), j.Get("options.num_predict").Int())
	reason := "stop"
	if cut {
		reason = "length"
	}
	var calls []any
	if s.cfg.toolCalls && j.Get("tools.#").Int() > 0 && j.Get("messages.@reverse.0.role").Str != "tool" {
		args, _ := json.Marshal(map[string]any{"input": in.Text})
		calls = []any{map[string]any{"function": map[string]any{"name": j.Get("tools.0.function.name").Str, "arguments": json.RawMessage(args)}}}
		text = ""
	}
	msg := func(content string, calls []any) map[string]any {
		m := map[string]any{"role": "assistant", "content": content}
		if calls != nil {
			m["tool_calls"] = calls
		}
		return m
	}
	final := map[string]any{"model": model, "created_at": "2023-11-14T22:13:20Z", "message": msg(text, calls), "done": true, "done_reason": reason,
		"total_duration": 1000, "prompt_eval_count": tokens(in.Text), "eval_count": tokens(text)}
	if !in.Stream {
		writeJSON(w, http.StatusOK, final)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flush := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return true
	}
	for _, part := range split(text, s.cfg.chunks) {
		if !flush(map[string]any{"model": model, "created_at": "2023-11-14T22:13:20Z", "message": msg(part, nil), "done": false}) {
			return
		}
	}
	if calls != nil && !flush(map[string]any{"model": model, "created_at": "2023-11-14T22:13:20Z", "message": msg("", calls), "done": false}) {
		return
	}
	final["message"] = msg("", nil)
	flush(final)
}
