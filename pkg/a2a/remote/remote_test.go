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
	"github.com/tidwall/gjson"

	"lockstep/pkg/a2a"
	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

func TestPinnedInterface(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ card, url, version string }{
		{`{"url":"http://r/03","protocolVersion":"0.3.0"}`, "http://r/03", "0.3"},
		{`{"url":"http://r/x"}`, "http://r/x", "0.3"},
		{`{"url":"http://r/x","protocolVersion":"1.0"}`, "http://r/x", "1.0"},
		{`{"url":"http://r/old","supportedInterfaces":[{"url":"http://r/grpc","protocolBinding":"GRPC","protocolVersion":"1.0"},
			{"url":"http://r/10","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"http://r/03","protocolBinding":"JSONRPC","protocolVersion":"0.3"}]}`, "http://r/10", "1.0"},
		{`{"supportedInterfaces":[{"url":"http://r/03","protocolBinding":"JSONRPC","protocolVersion":"0.3"}]}`, "http://r/03", "0.3"},
	} {
		url, v := a2a.PinnedInterface([]byte(c.card))
		require.Equal(t, c.url, url, c.card)
		require.Equal(t, c.version, v, c.card)
	}
}

func TestWireRequestAndAnswers(t *testing.T) {
	t.Parallel()
	r, err := format.ParseRequest(format.FormatChat, []byte(`{"model":"a","messages":[{"role":"user","content":"first"},{"role":"assistant","content":"ok"},{"role":"user","content":"hello agent"}]}`))
	require.NoError(t, err)
	b, err := wire{}.Request(nil, r)
	require.NoError(t, err)
	j := gjson.ParseBytes(b)
	require.Equal(t, "message/send", j.Get("method").Str)
	require.Equal(t, "lockstep-3", j.Get("id").Str, "⌈11/4⌉ prompt tokens in the id")
	require.JSONEq(t, `[{"kind":"text","text":"hello agent"}]`, j.Get("params.message.parts").Raw)
	require.Equal(t, "message", j.Get("params.message.kind").Str)
	b, err = wire{v10: true}.Request(nil, r)
	require.NoError(t, err)
	j = gjson.ParseBytes(b)
	require.Equal(t, "SendMessage", j.Get("method").Str)
	require.Equal(t, "ROLE_USER", j.Get("params.message.role").Str)
	require.JSONEq(t, `[{"text":"hello agent"}]`, j.Get("params.message.parts").Raw)

	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":"lockstep-3","result":{"kind":"message","role":"agent","parts":[{"kind":"text","text":"hi there"}]}}`,
		`{"jsonrpc":"2.0","id":"lockstep-3","result":{"message":{"role":"ROLE_AGENT","parts":[{"text":"hi "},{"text":"there"}]}}}`,
		`{"jsonrpc":"2.0","id":"lockstep-3","result":{"kind":"task","status":{"state":"completed"},"artifacts":[{"parts":[{"kind":"text","text":"hi there"}]}]}}`,
		`{"jsonrpc":"2.0","id":"lockstep-3","result":{"task":{"status":{"state":"TASK_STATE_COMPLETED","message":{"parts":[{"text":"hi there"}]}}}}}`,
	} {
		res, err := wire{}.Result([]byte(raw))
		require.NoError(t, err, raw)
		require.Contains(t, string(format.RenderResult(format.FormatChat, res)), `"content":"hi there"`, raw)
		require.Equal(t, format.Tokens{In: 3, Out: 2}, res.Tokens(), raw)
	}
	_, err = wire{}.Result([]byte(`{"jsonrpc":"2.0","id":"x","result":{"task":{"status":{"state":"TASK_STATE_FAILED","message":{"parts":[{"text":"boom"}]}}}}}`))
	var ue *format.UpstreamError
	require.True(t, errors.As(err, &ue))
	require.Equal(t, "a2a agent: boom", ue.Message)
	_, err = wire{}.Result([]byte(`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad"}}`))
	require.True(t, errors.As(err, &ue))
	require.Equal(t, 400, ue.Status)
	require.Equal(t, "a2a agent: bad (JSON-RPC error -32602)", ue.Message)
}

func TestWireStream(t *testing.T) {
	t.Parallel()
	for _, frames := range [][]string{
		{`{"id":"lockstep-2","result":{"kind":"task","id":"t","status":{"state":"submitted"}}}`,
			`{"id":"lockstep-2","result":{"kind":"status-update","status":{"state":"working"},"final":false}}`,
			`{"id":"lockstep-2","result":{"kind":"artifact-update","artifact":{"parts":[{"kind":"text","text":"hel"}]}}}`,
			`{"id":"lockstep-2","result":{"kind":"artifact-update","append":true,"artifact":{"parts":[{"kind":"text","text":"lo"}]}}}`,
			`{"id":"lockstep-2","result":{"kind":"status-update","status":{"state":"completed"},"final":true}}`},
		{`{"id":"lockstep-2","result":{"task":{"id":"t","status":{"state":"TASK_STATE_SUBMITTED"}}}}`,
			`{"id":"lockstep-2","result":{"artifactUpdate":{"artifact":{"parts":[{"text":"hel"}]}}}}`,
			`{"id":"lockstep-2","result":{"artifactUpdate":{"artifact":{"parts":[{"text":"lo"}]}}}}`,
			`{"id":"lockstep-2","result":{"statusUpdate":{"status":{"state":"TASK_STATE_COMPLETED"}}}}`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "SendStreamingMessage", gjson.GetBytes(readAll(t, r), "method").Str)
			require.Equal(t, "1.0", r.Header.Get("A2A-Version"))
			w.Header().Set("Content-Type", "text/event-stream")
			for _, f := range frames {
				_, _ = io.WriteString(w, "data: "+f+"\n\n")
			}
		}))
		pb, err := provider.NewBuilder(provider.Policy{}, Vendor)
		require.NoError(t, err)
		d, err := pb.NewDeployment("id", "grp", []byte(`{"model":"a2a_agent/x","api_base":"`+srv.URL+`","a2a_protocol_version":"1.0"}`))
		require.NoError(t, err)
		st, err := provider.NewClient().Stream(context.Background(), d, format.FormatChat, []byte(`{"model":"grp","stream":true,"messages":[{"role":"user","content":"q"}]}`))
		require.NoError(t, err)
		var text strings.Builder
		for {
			e, err := st.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			text.WriteString(e.Text)
		}
		srv.Close()
		require.Equal(t, "hello", text.String())
	}
}

func readAll(t *testing.T, r *http.Request) []byte {
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return b
}
