package a2a

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// fakeResolver is a Resolver whose behaviour is set per test.
type fakeResolver struct {
	ResolveAgentFunc func(ctx context.Context, idOrName string) (*Agent, error)
}

var _ Resolver = (*fakeResolver)(nil)

func (f *fakeResolver) ResolveAgent(ctx context.Context, idOrName string) (*Agent, error) {
	return f.ResolveAgentFunc(ctx, idOrName)
}

// fakeCompleter is a Completer whose behaviour is set per test.
type fakeCompleter struct {
	CompleteFunc func(ctx context.Context, agent *Agent, text string) (string, error)
	StreamFunc   func(ctx context.Context, agent *Agent, text string, onDelta func(string) error) error
}

var _ Completer = (*fakeCompleter)(nil)

func (f *fakeCompleter) Complete(ctx context.Context, _ Call, agent *Agent, text string) (string, error) {
	return f.CompleteFunc(ctx, agent, text)
}

func (f *fakeCompleter) Stream(ctx context.Context, _ Call, agent *Agent, text string, onDelta func(string) error) error {
	return f.StreamFunc(ctx, agent, text, onDelta)
}

// Polling bounds for the few outcomes that have no signal to wait on.
const (
	timeout = 5 * time.Second
	tick    = 5 * time.Millisecond
)

const (
	echoAgentID  = "6f1c2f4e-8a57-4c1e-9d2a-0b5e3c7d9a11"
	otherAgentID = "0a9d8c7b-6e5f-4a3b-2c1d-0e9f8a7b6c5d"
)

// testCard is a valid A2A v0.3 AgentCard as an admin would register it: the original agent's
// url, a gRPC interface the gateway does not serve, no protocolVersion.
func testCard(name string) string {
	return `{
		"name": "` + name + `",
		"description": "Echoes what it is told",
		"url": "http://upstream.internal:9999/",
		"version": "1.0.0",
		"capabilities": {"streaming": true},
		"defaultInputModes": ["text/plain"],
		"defaultOutputModes": ["text/plain"],
		"additionalInterfaces": [{"url": "grpc.internal:50051", "transport": "GRPC"}],
		"skills": [{"id": "echo", "name": "Echo", "description": "Says it back", "tags": ["test"]}]
	}`
}

func mustAgent(t *testing.T, id, name string) *Agent {
	t.Helper()
	agent, err := NewAgent(id, name, []byte(testCard(name)),
		[]byte(`{"model": "gpt-4o-mini", "guardrails": ["no-secrets"]}`))
	require.NoError(t, err)
	return agent
}

// testBundle is one handler served by its own httptest server.
type testBundle struct {
	agents    map[string]*Agent // by id and by name
	echo      *Agent
	resolver  *fakeResolver
	completer *fakeCompleter
	handler   *Handler
	server    *httptest.Server

	mu          sync.Mutex
	authHeaders []string // Authorization of every request, in order
}

// setup serves two agents, "echo-agent" and "other-agent", whose model answers "echo: <text>"
// and streams it as the deltas "echo", ": ", <text>. Routes mirror the gateway's:
// GET /a2a/{agent}/.well-known/agent-card.json and POST /a2a/{agent}.
func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{agents: map[string]*Agent{}}
	b.echo = mustAgent(t, echoAgentID, "echo-agent")
	other := mustAgent(t, otherAgentID, "other-agent")
	for _, a := range []*Agent{b.echo, other} {
		b.agents[a.ID] = a
		b.agents[a.Name] = a
	}
	b.resolver = &fakeResolver{ResolveAgentFunc: func(_ context.Context, idOrName string) (*Agent, error) {
		if a, ok := b.agents[idOrName]; ok {
			return a, nil
		}
		return nil, ErrAgentNotFound
	}}
	b.completer = &fakeCompleter{
		CompleteFunc: func(_ context.Context, _ *Agent, text string) (string, error) {
			return "echo: " + text, nil
		},
		StreamFunc: func(_ context.Context, _ *Agent, text string, onDelta func(string) error) error {
			for _, d := range []string{"echo", ": ", text} {
				if err := onDelta(d); err != nil {
					return err
				}
			}
			return nil
		},
	}
	b.handler = NewHandler(b.resolver, b.completer, zerolog.New(io.Discard))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /a2a/{agent}/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		b.handler.Card(w, r, r.PathValue("agent"), "http://"+r.Host)
	})
	mux.HandleFunc("POST /a2a/{agent}", func(w http.ResponseWriter, r *http.Request) {
		b.handler.RPC(w, r, r.PathValue("agent"), Call{})
	})
	b.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.authHeaders = append(b.authHeaders, r.Header.Get("Authorization"))
		b.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(b.server.Close)
	return b
}

// rpcResponse is a decoded JSON-RPC response; Raw keeps the whole object.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *Error          `json:"error"`
	Raw     map[string]json.RawMessage
}

func decodeRPC(t *testing.T, data []byte) rpcResponse {
	t.Helper()
	var r rpcResponse
	require.NoError(t, json.Unmarshal(data, &r), "response: %s", data)
	require.NoError(t, json.Unmarshal(data, &r.Raw))
	require.Equal(t, "2.0", r.JSONRPC)
	return r
}

// post sends body to POST /a2a/{agent} and returns the HTTP response (body unread).
func (b *testBundle) post(t *testing.T, agent, body string) *http.Response {
	t.Helper()
	resp, err := b.server.Client().Post(b.server.URL+"/a2a/"+agent, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// call sends one non-streaming JSON-RPC request and decodes the answer.
func (b *testBundle) call(t *testing.T, agent, body string) (int, rpcResponse) {
	t.Helper()
	resp := b.post(t, agent, body)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	return resp.StatusCode, decodeRPC(t, data)
}

// stream sends a streaming JSON-RPC request and decodes every SSE event.
func (b *testBundle) stream(t *testing.T, agent, body string) []rpcResponse {
	t.Helper()
	resp := b.post(t, agent, body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return readEvents(t, bufio.NewReader(resp.Body), -1)
}

// readEvents reads up to n (all when n < 0) SSE data events.
func readEvents(t *testing.T, r *bufio.Reader, n int) []rpcResponse {
	t.Helper()
	var events []rpcResponse
	for n < 0 || len(events) < n {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			require.Empty(t, line)
			break
		}
		require.NoError(t, err)
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		require.True(t, ok, "unexpected SSE line %q", line)
		events = append(events, decodeRPC(t, []byte(data)))
	}
	return events
}

func sendBody(method, id, message string) string {
	return `{"jsonrpc": "2.0", "id": ` + id + `, "method": "` + method + `", "params": {"message": ` + message + `}}`
}

const userMessage = `{"kind": "message", "role": "user", "messageId": "m-1",
	"parts": [{"kind": "text", "text": "hello"}, {"kind": "data", "data": {"x": 1}}, {"kind": "text", "text": "world"}]}`
