package remote

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// A remote agent's bad answers are 502s that say once what was wrong: a JSON-RPC error
// through the client keeps the wire's text (no "upstream 502: invalid upstream answer:
// upstream 502: ..."), a non-object "error" keeps its message, and a message with no parts
// array is refused naming the member instead of served as an empty success.
func TestRemoteBadAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		answer, msg string
		status      int
		retryable   bool
	}{
		{`{"jsonrpc":"2.0","id":"x","error":{"code":-32000,"message":"agent down"}}`, "a2a agent: agent down (JSON-RPC error -32000)", 502, true},
		{`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad"}}`, "a2a agent: bad (JSON-RPC error -32602)", 400, false},
		{`{"jsonrpc":"2.0","id":"x","error":"boom"}`, "a2a agent: boom (not a JSON-RPC error object)", 502, true},
		{`{"jsonrpc":"2.0","id":"x","error":42}`, "a2a agent: 42 (not a JSON-RPC error object)", 502, true},
		{`{"jsonrpc":"2.0","id":"x","result":{"kind":"message","role":"agent"}}`, "a2a agent: malformed answer: result.parts must be an array of parts, got nothing", 502, true},
		{`{"jsonrpc":"2.0","id":"x","result":{"kind":"message","role":"agent","parts":{"kind":"text","text":"hi"}}}`, "a2a agent: malformed answer: result.parts must be an array of parts, got object", 502, true},
		{`{"jsonrpc":"2.0","id":"x","result":{"message":{"role":"ROLE_AGENT","parts":"hi"}}}`, "a2a agent: malformed answer: result.message.parts must be an array of parts, got string", 502, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, c.answer)
		}))
		pb, err := provider.NewBuilder(provider.Policy{}, Vendor)
		require.NoError(t, err)
		d, err := pb.NewDeployment("id", "grp", []byte(`{"model":"a2a_agent/x","api_base":"`+srv.URL+`"}`))
		require.NoError(t, err)
		_, err = provider.NewClient().Do(context.Background(), d, format.FormatChat, []byte(`{"model":"grp","messages":[{"role":"user","content":"q"}]}`))
		srv.Close()
		var ue *format.UpstreamError
		require.True(t, errors.As(err, &ue), "%s: %v", c.answer, err)
		require.Equal(t, c.msg, ue.Message, c.answer)
		require.Equal(t, c.status, ue.Status, c.answer)
		require.Equal(t, c.retryable, ue.Retryable, c.answer)
	}
	// a message with its parts is still served
	res, err := wire{}.Result([]byte(`{"jsonrpc":"2.0","id":"x","result":{"kind":"message","parts":[]}}`))
	require.NoError(t, err)
	require.NotNil(t, res)
}

// In a stream, a message frame without a parts array fails the stream naming the member.
func TestRemoteStreamMessageWithoutParts(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"lockstep-1","result":{"kind":"message","parts":{"text":"hi"}}}`+"\n\n")
	}))
	defer srv.Close()
	pb, err := provider.NewBuilder(provider.Policy{}, Vendor)
	require.NoError(t, err)
	d, err := pb.NewDeployment("id", "grp", []byte(`{"model":"a2a_agent/x","api_base":"`+srv.URL+`"}`))
	require.NoError(t, err)
	st, err := provider.NewClient().Stream(context.Background(), d, format.FormatChat, []byte(`{"model":"grp","stream":true,"messages":[{"role":"user","content":"q"}]}`))
	require.NoError(t, err)
	var data strings.Builder
	for {
		e, err := st.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		data.Write(e.Data)
	}
	require.Contains(t, data.String(), "a2a agent: malformed answer: result.parts must be an array of parts, got object", "the stream ends in an error event")
}
