package fakeupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/tidwall/gjson"
)

// StartA2AAgent starts a fake remote A2A agent speaking one protocol version ("0.3" or
// "1.0") over the JSON-RPC 2.0 binding at POST /: 0.3's message/send (a Message result,
// {"kind": "message", "role": "agent", "parts": [{"kind": "text", "text"}]}) and
// message/stream (SSE: a submitted task, a working status update, the reply as artifact
// updates, a completed status update with "final": true); 1.0's SendMessage ({"message":
// {"role": "ROLE_AGENT", "parts": [{"text"}]}}) and SendStreamingMessage ({"task"},
// {"statusUpdate"}, {"artifactUpdate"}…, a TASK_STATE_COMPLETED {"statusUpdate"}), which also
// need the A2A-Version: 1.0 header (-32009 VersionNotSupportedError otherwise). The other
// version's methods are -32601 Method not found. The reply is the fake's ("fake reply to: <the
// message's text>" unless WithReply), split over WithStreamChunks artifact updates. Every request is
// recorded.
func StartA2AAgent(t testing.TB, version string, opts ...Option) *Server {
	s := Start(t, opts...)
	s.native = func(w http.ResponseWriter, r *http.Request, body []byte) { s.a2aAgent(w, r, version, body) }
	return s
}

func (s *Server) a2aAgent(w http.ResponseWriter, r *http.Request, version string, body []byte) {
	j := gjson.ParseBytes(body)
	id := json.RawMessage(j.Get("id").Raw)
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	rpcErr := func(code int, msg string) {
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	}
	if r.Method != http.MethodPost || !gjson.ValidBytes(body) || j.Get("jsonrpc").Str != "2.0" {
		rpcErr(-32600, "Invalid Request")
		return
	}
	method := j.Get("method").Str
	v10 := version == "1.0"
	var stream bool
	switch {
	case !v10 && (method == "message/send" || method == "message/stream"):
		stream = method == "message/stream"
	case v10 && (method == "SendMessage" || method == "SendStreamingMessage"):
		if r.Header.Get("A2A-Version") != "1.0" {
			rpcErr(-32009, "Version not supported")
			return
		}
		stream = method == "SendStreamingMessage"
	default:
		rpcErr(-32601, "Method not found")
		return
	}
	msg := j.Get("params.message")
	wantRole, textOf := "user", func(p gjson.Result) (string, bool) { return p.Get("text").Str, p.Get("kind").Str == "text" }
	if v10 {
		wantRole = "ROLE_USER"
		textOf = func(p gjson.Result) (string, bool) {
			t := p.Get("text")
			return t.Str, t.Exists() && !p.Get("kind").Exists()
		}
	}
	var text string
	ok := msg.Get("role").Str == wantRole && msg.Get("messageId").Str != ""
	msg.Get("parts").ForEach(func(_, p gjson.Result) bool {
		t, isText := textOf(p)
		ok = ok && isText
		text += t
		return ok
	})
	if !ok || text == "" {
		rpcErr(-32602, "Invalid params: a "+version+" message with role "+wantRole+", a messageId and text parts is required")
		return
	}
	in := ReplyInput{API: "a2a", Path: r.URL.Path, Text: text, Stream: stream, Body: body, Header: r.Header}
	reply := s.cfg.reply(in)
	n := s.seq.Add(1)
	taskID, ctxID := fmt.Sprintf("remote-task-%d", n), fmt.Sprintf("remote-ctx-%d", n)
	textPart := func(t string) map[string]any {
		if v10 {
			return map[string]any{"text": t}
		}
		return map[string]any{"kind": "text", "text": t}
	}
	if !stream {
		m := map[string]any{"messageId": fmt.Sprintf("remote-msg-%d", n), "contextId": ctxID, "parts": []any{textPart(reply)}}
		var result any
		if v10 {
			m["role"] = "ROLE_AGENT"
			result = map[string]any{"message": m}
		} else {
			m["kind"], m["role"] = "message", "agent"
			result = m
		}
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		return
	}
	e := s.startSSE(w, r)
	send := func(result any) bool {
		return e.frame("", map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	state := func(s string) string {
		if v10 {
			return map[string]string{"submitted": "TASK_STATE_SUBMITTED", "working": "TASK_STATE_WORKING", "completed": "TASK_STATE_COMPLETED"}[s]
		}
		return s
	}
	status := func(st string, final bool) any {
		u := map[string]any{"taskId": taskID, "contextId": ctxID, "status": map[string]any{"state": state(st)}}
		if v10 {
			return map[string]any{"statusUpdate": u}
		}
		u["kind"], u["final"] = "status-update", final
		return u
	}
	task := map[string]any{"id": taskID, "contextId": ctxID, "status": map[string]any{"state": state("submitted")}}
	var first any = map[string]any{"task": task}
	if !v10 {
		task["kind"] = "task"
		first = task
	}
	if !send(first) || !send(status("working", false)) {
		return
	}
	for i, part := range split(reply, s.cfg.chunks) {
		a := map[string]any{"taskId": taskID, "contextId": ctxID, "append": i > 0,
			"artifact": map[string]any{"artifactId": "remote-artifact-1", "parts": []any{textPart(part)}}}
		var ev any = map[string]any{"artifactUpdate": a}
		if !v10 {
			a["kind"] = "artifact-update"
			ev = a
		}
		if !send(ev) {
			return
		}
	}
	send(status("completed", true))
}
