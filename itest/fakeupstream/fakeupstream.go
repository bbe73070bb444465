// Package fakeupstream is a fake upstream LLM for tests. It speaks the real wire formats of
// the OpenAI API (Chat Completions, Responses, Embeddings) and the Anthropic Messages API,
// streaming included, so that the official SDKs (openai-go, anthropic-sdk-go) parse its answers
// and the gateway can be tested end to end without internet access.
//
// Routes (each also without the /v1 prefix):
//
//	POST /v1/chat/completions  OpenAI chat completion; "stream": true → SSE chat.completion.chunk frames and "data: [DONE]"
//	                           (usage only with stream_options.include_usage, as OpenAI: "usage": null on every chunk, then a "choices": [] usage chunk)
//	POST /v1/responses         OpenAI Responses object; "stream": true → typed SSE events (response.created … response.completed)
//	POST /v1/embeddings        OpenAI embedding list; deterministic vectors, "encoding_format": "base64" honoured
//	POST /v1/messages          Anthropic Message; "stream": true → message_start … message_stop
//
// The fake checks what the real APIs check first: a JSON body with a "model", an
// "Authorization: Bearer <key>" header on OpenAI paths, and on /v1/messages an "x-api-key" (or a
// bearer token, which newer Anthropic SDKs send), an "anthropic-version" header and a
// "max_tokens". It records every request (see [Server.Requests]). Errors can be injected for
// every request ([WithStatus], [Server.SetStatus]), for the next few ([Server.FailNext]) or in
// the middle of a stream ([WithStreamCutAfter]).
package fakeupstream

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Created is the fixed "created" timestamp (Unix seconds) of every object the fake returns, so
// that answers are byte-for-byte reproducible.
const Created = 1700000000

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string // URL path as received, e.g. "/v1/chat/completions"
	Query  string // raw query, without "?"
	Header http.Header
	Body   []byte
	Time   time.Time
}

// API names the upstream API a request was addressed to.
type API string

// APIs the fake serves.
const (
	APIChat           API = "chat"
	APIResponses      API = "responses"
	APIMessages       API = "messages"
	APIEmbeddings     API = "embeddings"
	APICompletions    API = "completions"
	APIImages         API = "images"
	APIModerations    API = "moderations"
	APISpeech         API = "speech"
	APITranscriptions API = "transcriptions"
)

// ReplyInput is what a reply function (see [WithReply]) sees of a request.
type ReplyInput struct {
	API    API
	Path   string
	Model  string // the request's "model"
	Text   string // text of the last user message (chat/responses/messages), or the first embeddings input
	Stream bool
	Body   []byte
	Header http.Header
	// maxTokens, when > 0, cuts a Messages answer to that many words (stop_reason
	// max_tokens), as Claude on Bedrock does (bedrock_invoke.go)
	maxTokens int64
}

// ToolCall is a tool call the fake answers with (see [WithToolCalls]).
type ToolCall struct {
	Name      string
	Arguments string // JSON object text
}

type config struct {
	reply      func(ReplyInput) string
	chunkDelay time.Duration
	status     int
	chunks     int
	toolCalls  bool
	embedDims  int
	errorBody  string
	cutAfter   int
	latency    time.Duration
	echoHdrs   bool
	redirect   int
	redirectTo string
	deltas     []map[string]any
	modelIDs   []string
	errAfter   int            // WithStreamErrorAfter: frames before the error event (0: none)
	errEvent   map[string]any // its {"message", "type", "param", "code"}
}

// Option configures a [Server].
type Option func(*config)

// WithModels sets the model ids GET /models lists (default ["fake-model"]).
func WithModels(ids ...string) Option { return func(c *config) { c.modelIDs = ids } }

// WithReply sets the function producing the assistant text. Default: "fake reply to: <Text>".
func WithReply(f func(ReplyInput) string) Option { return func(c *config) { c.reply = f } }

// WithChunkDelay sleeps d between two SSE frames of a streamed answer (default 0).
func WithChunkDelay(d time.Duration) Option { return func(c *config) { c.chunkDelay = d } }

// WithStatus makes every request fail with HTTP status code and an error body in the API's
// format (OpenAI `{"error": {...}}`, Anthropic `{"type": "error", "error": {...}}`). Code 0 or
// 2xx means "answer normally". See also [Server.SetStatus].
func WithStatus(code int) Option { return func(c *config) { c.status = code } }

// WithErrorMessage sets the message carried by injected errors (default "fake upstream error <code>").
func WithErrorMessage(msg string) Option { return func(c *config) { c.errorBody = msg } }

// WithStreamChunks sets how many text deltas a streamed answer is split into (default 4; fewer
// when the text has fewer runes).
func WithStreamChunks(n int) Option { return func(c *config) { c.chunks = max(n, 1) } }

// WithToolCalls makes the fake answer with a call of the first declared tool, instead of text,
// whenever the request declares tools and its last message is not a tool result. The call's
// arguments are {"input": "<Text>"}.
func WithToolCalls() Option { return func(c *config) { c.toolCalls = true } }

// WithStreamCutAfter makes streamed answers break off after n SSE frames: the connection is
// aborted without the terminal event, as when an upstream dies mid-stream.
func WithStreamCutAfter(n int) Option { return func(c *config) { c.cutAfter = n } }

// WithChatStreamDeltas makes a streamed chat completion send exactly these choice deltas, one
// chunk each, after the role chunk and before the finish_reason chunk, instead of the reply
// text split in chunks: e.g. {"content": "card 4111 1111"}, {} (an empty delta),
// {"role": "assistant"}, {"tool_calls": [...]}.
func WithChatStreamDeltas(deltas ...map[string]any) Option {
	return func(c *config) { c.deltas = deltas }
}

// WithLatency holds every request for d before answering (after recording it), so tests can
// observe how many calls are in flight at once (see [Server.MaxConcurrent]).
func WithLatency(d time.Duration) Option { return func(c *config) { c.latency = d } }

// WithEmbeddingDims sets the default embedding vector length (default 8); a request's
// "dimensions" wins.
func WithEmbeddingDims(n int) Option { return func(c *config) { c.embedDims = max(n, 1) } }

// Server is a running fake upstream.
type Server struct {
	// URL is the base URL, e.g. "http://127.0.0.1:40123", without "/v1".
	URL string

	cfg      config
	hs       *httptest.Server
	status   atomic.Int64
	seq      atomic.Int64
	failNext atomic.Int64 // requests left to fail with failCode
	failCode atomic.Int64
	inflight atomic.Int64
	maxIn    atomic.Int64
	// set at run time (SetLatency, FailWith): an added delay, and the error code and message
	// of the injected failures
	latency atomic.Int64
	errCode atomic.Pointer[string]
	errMsg  atomic.Pointer[string]

	mu   sync.Mutex
	reqs []Request

	// front, when set, checks and rewrites a request before the OpenAI/Anthropic routes see
	// it (the Azure deployment paths); false means it has answered.
	front func(w http.ResponseWriter, r *http.Request) bool
	// native, when set, serves the request instead of the OpenAI/Anthropic routes (Gemini,
	// Vertex AI, Bedrock, Ollama fakes).
	native func(w http.ResponseWriter, r *http.Request, body []byte)
}

// Start starts a fake upstream for a test and closes it with t.Cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := New(opts...)
	if err != nil {
		t.Fatalf("fakeupstream: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a fake upstream on a loopback port. Call Close when done.
func New(opts ...Option) (*Server, error) {
	s := &Server{cfg: config{chunks: 4, embedDims: 8}}
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.reply == nil {
		s.cfg.reply = func(in ReplyInput) string { return "fake reply to: " + in.Text }
	}
	s.status.Store(int64(s.cfg.status))
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.hs.URL
	return s, nil
}

// Close stops the server and closes its connections.
func (s *Server) Close() { s.hs.Close() }

// SetStatus changes the injected error status at run time (0 = answer normally).
func (s *Server) SetStatus(code int) {
	if code == 0 {
		s.errCode.Store(nil)
	}
	s.status.Store(int64(code))
}

// FailNext makes the next n requests (after authentication) fail with status code, then
// answers normally again: for retry and fallback tests.
func (s *Server) FailNext(n, code int) {
	s.failCode.Store(int64(code))
	s.failNext.Store(int64(n))
}

// MaxConcurrent is the most requests the fake was serving at once since it started (or the
// last [Server.Reset]).
func (s *Server) MaxConcurrent() int { return int(s.maxIn.Load()) }

// Requests returns a copy of every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	copy(out, s.reqs)
	return out
}

// LastRequest returns the newest request whose path is path (with or without the /v1 prefix).
func (s *Server) LastRequest(path string) (Request, bool) {
	want := strings.TrimPrefix(path, "/v1")
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.reqs) - 1; i >= 0; i-- {
		if strings.TrimPrefix(s.reqs[i].Path, "/v1") == want {
			return s.reqs[i], true
		}
	}
	return Request{}, false
}

// Reset forgets the recorded requests.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
	s.maxIn.Store(0)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Time: time.Now()})
	s.mu.Unlock()
	cur := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for m := s.maxIn.Load(); cur > m && !s.maxIn.CompareAndSwap(m, cur); m = s.maxIn.Load() {
	}
	if lat := s.cfg.latency + time.Duration(s.latency.Load()); lat > 0 {
		select {
		case <-time.After(lat):
		case <-r.Context().Done():
			return
		}
	}
	if s.cfg.redirect != 0 {
		w.Header().Set("Location", s.cfg.redirectTo+r.URL.RequestURI())
		w.WriteHeader(s.cfg.redirect)
		return
	}
	if s.native != nil {
		s.native(w, r, body)
		return
	}
	if s.front != nil && !s.front(w, r) {
		return
	}

	if strings.TrimPrefix(r.URL.Path, "/v1") == "/models" && r.Method == http.MethodGet {
		s.models(w, r)
		return
	}
	var api API
	switch strings.TrimPrefix(r.URL.Path, "/v1") {
	case "/completions":
		api = APICompletions
	case "/images/generations":
		api = APIImages
	case "/moderations":
		api = APIModerations
	case "/audio/speech":
		api = APISpeech
	case "/audio/transcriptions":
		api = APITranscriptions
	case "/chat/completions":
		api = APIChat
	case "/responses":
		api = APIResponses
	case "/embeddings":
		api = APIEmbeddings
	case "/messages":
		api = APIMessages
	default:
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
		return
	}
	if r.Method != http.MethodPost {
		s.fail(w, api, http.StatusMethodNotAllowed, "method not allowed")
		return
	}

	// Authentication comes first, as on the real APIs.
	if api == APIMessages {
		if r.Header.Get("x-api-key") == "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			writeAnthropicError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
			return
		}
		if r.Header.Get("anthropic-version") == "" {
			writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
			return
		}
	} else if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || strings.TrimSpace(tok) == "" {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
		return
	}
	code := int(s.status.Load())
	if s.failNext.Add(-1) >= 0 {
		code = int(s.failCode.Load())
	}
	if code != 0 && (code < 200 || code > 299) {
		msg := s.cfg.errorBody
		if msg == "" {
			msg = fmt.Sprintf("fake upstream error %d", code)
		}
		if c := s.errCode.Load(); c != nil && *c != "" && api != APIMessages {
			writeJSON(w, code, map[string]any{"error": map[string]any{"message": *s.errMsg.Load(), "type": openAIErrorType(code), "param": nil, "code": *c}})
			return
		}
		s.fail(w, api, code, s.echo(msg, r))
		return
	}
	if api == APITranscriptions {
		s.transcriptions(w, r, body)
		return
	}
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		s.fail(w, api, http.StatusBadRequest, "We could not parse the JSON body of your request.")
		return
	}
	model := gjson.GetBytes(body, "model")
	if model.Type != gjson.String || model.Str == "" {
		s.fail(w, api, http.StatusBadRequest, "model: Field required")
		return
	}
	in := ReplyInput{API: api, Path: r.URL.Path, Model: model.Str, Stream: gjson.GetBytes(body, "stream").Type == gjson.True, Body: body, Header: r.Header}
	n := s.seq.Add(1)
	switch api {
	case APIChat:
		if !gjson.GetBytes(body, "messages").IsArray() {
			s.fail(w, api, http.StatusBadRequest, "messages: Field required")
			return
		}
		in.Text = lastUserText(gjson.GetBytes(body, "messages"))
		s.chat(w, r, in, n)
	case APIResponses:
		in.Text = responsesUserText(gjson.GetBytes(body, "input"))
		s.responses(w, r, in, n)
	case APIMessages:
		if gjson.GetBytes(body, "max_tokens").Type != gjson.Number {
			writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
			return
		}
		if !gjson.GetBytes(body, "messages").IsArray() {
			writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "messages: Field required")
			return
		}
		in.Text = lastUserText(gjson.GetBytes(body, "messages"))
		s.messages(w, r, in, n)
	case APIEmbeddings:
		s.embeddings(w, in)
	case APICompletions:
		in.Text = textOf(gjson.GetBytes(body, "prompt"))
		s.completions(w, r, in, n)
	case APIImages:
		in.Text = gjson.GetBytes(body, "prompt").Str
		s.images(w, in)
	case APIModerations:
		in.Text = textOf(gjson.GetBytes(body, "input"))
		s.moderations(w, in, n)
	case APISpeech:
		in.Text = gjson.GetBytes(body, "input").Str
		s.speech(w, in)
	}
}

func (s *Server) fail(w http.ResponseWriter, api API, code int, msg string) {
	if api == APIMessages {
		writeAnthropicError(w, code, anthropicErrorType(code), msg)
		return
	}
	writeOpenAIError(w, code, openAIErrorType(code), msg)
}

func openAIErrorType(code int) string {
	switch {
	case code == http.StatusUnauthorized:
		return "invalid_request_error"
	case code == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case code >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func anthropicErrorType(code int) string {
	switch code {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if code >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func writeOpenAIError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func writeAnthropicError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// sse writes Server-Sent Events, flushing after each frame and pausing between frames.
type sse struct {
	w     http.ResponseWriter
	r     *http.Request
	delay time.Duration
	n     int
	cut   int
	// errAfter, errEvent: WithStreamErrorAfter (OpenAI chat streams)
	errAfter int
	errEvent map[string]any
}

func (s *Server) startSSE(w http.ResponseWriter, r *http.Request) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, r: r, delay: s.cfg.chunkDelay, cut: s.cfg.cutAfter, errAfter: s.cfg.errAfter, errEvent: s.cfg.errEvent}
}

// frame writes one SSE frame. event may be empty (OpenAI chat); data is a JSON value or "[DONE]".
func (e *sse) frame(event string, data any) bool {
	if e.n > 0 && e.delay > 0 {
		select {
		case <-time.After(e.delay):
		case <-e.r.Context().Done():
			return false
		}
	}
	if e.cut > 0 && e.n >= e.cut {
		panic(http.ErrAbortHandler) // drop the connection mid-stream
	}
	if e.errAfter > 0 && e.n >= e.errAfter && event == "" {
		// OpenAI's mid-stream failure: one data frame with "error", then the stream ends
		e.errAfter = 0
		if !e.frame("", map[string]any{"error": e.errEvent}) {
			return false
		}
		return false
	}
	e.n++
	var buf bytes.Buffer
	if event != "" {
		buf.WriteString("event: ")
		buf.WriteString(event)
		buf.WriteByte('\n')
	}
	buf.WriteString("data: ")
	switch d := data.(type) {
	case string:
		buf.WriteString(d)
	default:
		b, err := json.Marshal(d)
		if err != nil {
			panic(err)
		}
		buf.Write(b)
	}
	buf.WriteString("\n\n")
	if _, err := e.w.Write(buf.Bytes()); err != nil {
		return false
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

// split cuts text into at most n non-empty pieces on rune boundaries.
func split(text string, n int) []string {
	runes := utf8.RuneCountInString(text)
	if runes == 0 {
		return nil
	}
	n = min(n, runes)
	out := make([]string, 0, n)
	per := runes / n
	extra := runes % n
	for i := 0; i < n; i++ {
		want := per
		if i < extra {
			want++
		}
		j := 0
		for k := 0; k < want; k++ {
			_, size := utf8.DecodeRuneInString(text[j:])
			j += size
		}
		out = append(out, text[:j])
		text = text[j:]
	}
	return out
}

// tokens is the fake's token count: whitespace-separated words, at least 1.
func tokens(s string) int {
	return max(len(strings.Fields(s)), 1)
}

// lastUserText returns the text of the last role:"user" message of a chat or Anthropic
// messages array (string content, or the "text" parts/blocks joined with "\n").
func lastUserText(messages gjson.Result) string {
	arr := messages.Array()
	for i := len(arr) - 1; i >= 0; i-- {
		if arr[i].Get("role").Str != "user" {
			continue
		}
		return contentText(arr[i].Get("content"))
	}
	return ""
}

func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	c.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").Str {
		case "text", "input_text", "output_text":
			parts = append(parts, p.Get("text").Str)
		}
		return true
	})
	return strings.Join(parts, "\n")
}

func responsesUserText(input gjson.Result) string {
	if input.Type == gjson.String {
		return input.Str
	}
	arr := input.Array()
	for i := len(arr) - 1; i >= 0; i-- {
		if arr[i].Get("role").Str == "user" {
			return contentText(arr[i].Get("content"))
		}
	}
	return ""
}

// wantsTool reports the tool to call, if tool calls are enabled, tools are declared and the
// last message is not a tool result.
func (s *Server) wantsTool(in ReplyInput) *ToolCall {
	if !s.cfg.toolCalls {
		return nil
	}
	tools := gjson.GetBytes(in.Body, "tools")
	if !tools.IsArray() || len(tools.Array()) == 0 {
		return nil
	}
	first := tools.Array()[0]
	name := first.Get("function.name").Str // chat
	if name == "" {
		name = first.Get("name").Str // responses, messages
	}
	switch in.API {
	case APIChat:
		msgs := gjson.GetBytes(in.Body, "messages").Array()
		if len(msgs) > 0 && msgs[len(msgs)-1].Get("role").Str == "tool" {
			return nil
		}
	case APIMessages:
		msgs := gjson.GetBytes(in.Body, "messages").Array()
		if len(msgs) > 0 {
			isResult := false
			msgs[len(msgs)-1].Get("content").ForEach(func(_, b gjson.Result) bool {
				isResult = isResult || b.Get("type").Str == "tool_result"
				return true
			})
			if isResult {
				return nil
			}
		}
	case APIResponses:
		items := gjson.GetBytes(in.Body, "input").Array()
		if len(items) > 0 && (items[len(items)-1].Get("type").Str == "function_call_output" || items[len(items)-1].Get("type").Str == "custom_tool_call_output") {
			return nil
		}
	}
	key := "input"
	// a tool whose one parameter is "content" (a freeform tool's function form, as LiteLLM
	// and the gateway send Responses custom tools) is filled as a model fills it
	for _, schema := range []string{"input_schema", "parameters", "function.parameters"} {
		if props := first.Get(schema + ".properties"); props.IsObject() && len(props.Map()) == 1 && props.Get("content").Exists() {
			key = "content"
		}
	}
	args, _ := json.Marshal(map[string]string{key: in.Text})
	return &ToolCall{Name: name, Arguments: string(args)}
}

// ---- OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat) ----

func (s *Server) chat(w http.ResponseWriter, r *http.Request, in ReplyInput, n int64) {
	id := fmt.Sprintf("chatcmpl-fake%d", n)
	tool := s.wantsTool(in)
	text := ""
	if tool == nil {
		text = s.cfg.reply(in)
	}
	promptTokens, completionTokens := tokens(in.Text), tokens(text)
	if tool != nil {
		completionTokens = tokens(tool.Arguments)
	}
	usage := map[string]any{
		"prompt_tokens": promptTokens, "completion_tokens": completionTokens, "total_tokens": promptTokens + completionTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": 0, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
	finish := "stop"
	var toolCalls []map[string]any
	if tool != nil {
		finish = "tool_calls"
		toolCalls = []map[string]any{{"id": fmt.Sprintf("call_fake%d", n), "type": "function", "function": map[string]any{"name": tool.Name, "arguments": tool.Arguments}}}
	}
	if !in.Stream {
		msg := map[string]any{"role": "assistant", "content": text, "refusal": nil, "annotations": []any{}}
		if tool != nil {
			msg["content"] = nil
			msg["tool_calls"] = toolCalls
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": Created, "model": in.Model,
			"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":              usage,
			"service_tier":       "default",
			"system_fingerprint": "fp_fake",
		})
		return
	}
	e := s.startSSE(w, r)
	// as OpenAI: with stream_options.include_usage every chunk carries "usage": null and one
	// more chunk ("choices": [] and the usage) comes before [DONE]; without it, neither
	askedUsage := gjson.GetBytes(in.Body, "stream_options.include_usage").Bool()
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": Created, "model": in.Model,
			"service_tier": "default", "system_fingerprint": "fp_fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
		if askedUsage {
			c["usage"] = nil
		}
		return c
	}
	if !e.frame("", chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)) {
		return
	}
	if tool != nil {
		tc := toolCalls[0]
		first := map[string]any{"index": 0, "id": tc["id"], "type": "function", "function": map[string]any{"name": tool.Name, "arguments": ""}}
		if !e.frame("", chunk(map[string]any{"tool_calls": []any{first}}, nil)) {
			return
		}
		for _, part := range split(tool.Arguments, s.cfg.chunks) {
			if !e.frame("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": part}}}}, nil)) {
				return
			}
		}
	}
	for _, d := range s.cfg.deltas {
		if !e.frame("", chunk(d, nil)) {
			return
		}
	}
	for _, part := range split(text, s.cfg.chunks) {
		if s.cfg.deltas != nil {
			break
		}
		if !e.frame("", chunk(map[string]any{"content": part}, nil)) {
			return
		}
	}
	if !e.frame("", chunk(map[string]any{}, finish)) {
		return
	}
	if askedUsage {
		u := chunk(nil, nil)
		u["choices"] = []any{}
		u["usage"] = usage
		if !e.frame("", u) {
			return
		}
	}
	e.frame("", "[DONE]")
}

// ---- OpenAI Responses (https://platform.openai.com/docs/api-reference/responses) ----

func (s *Server) responses(w http.ResponseWriter, r *http.Request, in ReplyInput, n int64) {
	id := fmt.Sprintf("resp_fake%d", n)
	msgID := fmt.Sprintf("msg_fake%d", n)
	tool := s.wantsTool(in)
	text := ""
	if tool == nil {
		text = s.cfg.reply(in)
	}
	inTok, outTok := tokens(in.Text), tokens(text)
	if tool != nil {
		outTok = tokens(tool.Arguments)
	}
	var instructions any
	if v := gjson.GetBytes(in.Body, "instructions"); v.Type == gjson.String {
		instructions = v.Str
	}
	resp := func(status string, output []any, usage any) map[string]any {
		return map[string]any{
			"id": id, "object": "response", "created_at": Created, "status": status,
			"background": false, "error": nil, "incomplete_details": nil, "instructions": instructions,
			"max_output_tokens": nil, "max_tool_calls": nil, "model": in.Model, "output": output,
			"parallel_tool_calls": true, "previous_response_id": nil, "prompt_cache_key": nil,
			"reasoning": map[string]any{"effort": nil, "summary": nil}, "safety_identifier": nil,
			"service_tier": "default", "store": true, "temperature": 1.0,
			"text":        map[string]any{"format": map[string]any{"type": "text"}, "verbosity": "medium"},
			"tool_choice": "auto", "tools": []any{}, "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled",
			"usage": usage, "user": nil, "metadata": map[string]any{},
		}
	}
	usage := map[string]any{
		"input_tokens": inTok, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": outTok, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": inTok + outTok,
	}
	textPart := func(t string) map[string]any {
		return map[string]any{"type": "output_text", "text": t, "annotations": []any{}, "logprobs": []any{}}
	}
	message := func(status string, content []any) map[string]any {
		return map[string]any{"id": msgID, "type": "message", "status": status, "role": "assistant", "content": content}
	}
	fcall := func(status, args string) map[string]any {
		return map[string]any{"id": fmt.Sprintf("fc_fake%d", n), "type": "function_call", "status": status,
			"call_id": fmt.Sprintf("call_fake%d", n), "name": tool.Name, "arguments": args}
	}
	var final []any
	if tool != nil {
		final = []any{fcall("completed", tool.Arguments)}
	} else {
		final = []any{message("completed", []any{textPart(text)})}
	}
	if !in.Stream {
		writeJSON(w, http.StatusOK, resp("completed", final, usage))
		return
	}
	e := s.startSSE(w, r)
	seq := 0
	ev := func(typ string, fields map[string]any) bool {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		return e.frame(typ, fields)
	}
	if !ev("response.created", map[string]any{"response": resp("in_progress", []any{}, nil)}) ||
		!ev("response.in_progress", map[string]any{"response": resp("in_progress", []any{}, nil)}) {
		return
	}
	if tool != nil {
		itemID := fmt.Sprintf("fc_fake%d", n)
		if !ev("response.output_item.added", map[string]any{"output_index": 0, "item": fcall("in_progress", "")}) {
			return
		}
		for _, part := range split(tool.Arguments, s.cfg.chunks) {
			if !ev("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": 0, "delta": part}) {
				return
			}
		}
		if !ev("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": 0, "name": tool.Name, "arguments": tool.Arguments}) ||
			!ev("response.output_item.done", map[string]any{"output_index": 0, "item": final[0]}) {
			return
		}
	} else {
		if !ev("response.output_item.added", map[string]any{"output_index": 0, "item": message("in_progress", []any{})}) ||
			!ev("response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "part": textPart("")}) {
			return
		}
		for _, part := range split(text, s.cfg.chunks) {
			if !ev("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "delta": part, "logprobs": []any{}}) {
				return
			}
		}
		if !ev("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}}) ||
			!ev("response.content_part.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "part": textPart(text)}) ||
			!ev("response.output_item.done", map[string]any{"output_index": 0, "item": final[0]}) {
			return
		}
	}
	ev("response.completed", map[string]any{"response": resp("completed", final, usage)})
}

// ---- OpenAI Embeddings (https://platform.openai.com/docs/api-reference/embeddings) ----

func (s *Server) embeddings(w http.ResponseWriter, in ReplyInput) {
	input := gjson.GetBytes(in.Body, "input")
	var inputs []string
	switch {
	case input.Type == gjson.String:
		inputs = []string{input.Str}
	case input.IsArray():
		for _, v := range input.Array() {
			inputs = append(inputs, v.Raw) // strings, token ids or token arrays: hash the raw JSON
		}
	default:
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "input: Field required")
		return
	}
	if len(inputs) == 0 {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "'$.input' is invalid: empty array")
		return
	}
	dims := s.cfg.embedDims
	if d := gjson.GetBytes(in.Body, "dimensions"); d.Type == gjson.Number && d.Int() > 0 {
		dims = int(d.Int())
	}
	b64 := gjson.GetBytes(in.Body, "encoding_format").Str == "base64"
	data := make([]any, 0, len(inputs))
	total := 0
	for i, text := range inputs {
		if input.IsArray() && gjson.Parse(text).Type == gjson.String {
			text = gjson.Parse(text).Str
		}
		total += tokens(text)
		vec := Vector(text, dims)
		var emb any = vec
		if b64 {
			buf := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(float32(f)))
			}
			emb = base64.StdEncoding.EncodeToString(buf)
		}
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": emb})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": in.Model,
		"usage": map[string]any{"prompt_tokens": total, "total_tokens": total},
	})
}

// Vector is the fake's deterministic embedding of text: dims floats in [-1, 1) derived from
// an FNV-1a hash of the text, rounded to float32 precision (so the base64 form is exact).
func Vector(text string, dims int) []float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	x := h.Sum64()
	out := make([]float64, dims)
	for i := range out {
		// xorshift64*
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		v := x * 2685821657736338717
		out[i] = float64(float32(float64(v>>11)/float64(1<<53)*2 - 1))
	}
	return out
}

// ---- Anthropic Messages (https://docs.anthropic.com/en/api/messages) ----

func (s *Server) messages(w http.ResponseWriter, r *http.Request, in ReplyInput, n int64) {
	id := fmt.Sprintf("msg_fake%d", n)
	tool := s.wantsTool(in)
	text := ""
	if tool == nil {
		text = s.cfg.reply(in)
	}
	stop := "end_turn"
	if cut := false; in.maxTokens > 0 {
		if text, cut = truncate(text, in.maxTokens); cut {
			stop = "max_tokens"
		}
	}
	inTok, outTok := tokens(in.Text), tokens(text)
	var block map[string]any
	if tool != nil {
		outTok = tokens(tool.Arguments)
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", n), "name": tool.Name, "input": json.RawMessage(tool.Arguments)}
	} else {
		block = map[string]any{"type": "text", "text": text}
	}
	if !in.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": in.Model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": inTok, "output_tokens": outTok, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "service_tier": "standard"},
		})
		return
	}
	e := s.startSSE(w, r)
	if !e.frame("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": in.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inTok, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "service_tier": "standard"},
	}}) {
		return
	}
	start := map[string]any{"type": "text", "text": ""}
	if tool != nil {
		start = map[string]any{"type": "tool_use", "id": block["id"], "name": tool.Name, "input": map[string]any{}}
	}
	if !e.frame("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start}) ||
		!e.frame("ping", map[string]any{"type": "ping"}) {
		return
	}
	if tool != nil {
		for _, part := range split(tool.Arguments, s.cfg.chunks) {
			if !e.frame("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}}) {
				return
			}
		}
	}
	for _, part := range split(text, s.cfg.chunks) {
		if !e.frame("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": part}}) {
			return
		}
	}
	if !e.frame("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}) ||
		!e.frame("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": outTok}}) {
		return
	}
	e.frame("message_stop", map[string]any{"type": "message_stop"})
}

// models answers GET /v1/models, the model list both OpenAI (Bearer auth, {"object": "list",
// "data": [{"id", "object": "model", "created", "owned_by"}]}) and Anthropic (x-api-key,
// {"data": [{"id", "type": "model", "display_name", "created_at"}], "has_more"}) serve; the
// configured failure status applies as on every route.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	anthropic := r.Header.Get("x-api-key") != ""
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !anthropic && (!ok || strings.TrimSpace(tok) == "") {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
		return
	}
	if code := int(s.status.Load()); code != 0 && (code < 200 || code > 299) {
		msg := s.cfg.errorBody
		if msg == "" {
			msg = fmt.Sprintf("fake upstream error %d", code)
		}
		msg = s.echo(msg, r)
		if anthropic {
			writeAnthropicError(w, code, anthropicErrorType(code), msg)
		} else {
			writeOpenAIError(w, code, openAIErrorType(code), msg)
		}
		return
	}
	ids := s.cfg.modelIDs
	if ids == nil {
		ids = []string{"fake-model"}
	}
	data := make([]map[string]any, len(ids))
	for i, id := range ids {
		if anthropic {
			data[i] = map[string]any{"id": id, "type": "model", "display_name": id, "created_at": "2025-01-01T00:00:00Z"}
		} else {
			data[i] = map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "fake"}
		}
	}
	if anthropic {
		writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false, "first_id": ids[0], "last_id": ids[len(ids)-1]})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}
