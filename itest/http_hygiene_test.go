package itest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// bigBody streams a JSON object of size bytes whose "content" is all "a", through a reader of
// unknown length, so the client sends it chunked (no Content-Length).
type bigBody struct {
	head, tail string
	left       int64 // bytes of "a" still to send
	pos        int
	tailPos    int
}

func newBigBody(head string, size int64) *bigBody {
	tail := `"}]}`
	return &bigBody{head: head, tail: tail, left: size - int64(len(head)+len(tail))}
}

func (b *bigBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		switch {
		case b.pos < len(b.head):
			c := copy(p[n:], b.head[b.pos:])
			b.pos += c
			n += c
		case b.left > 0:
			c := int64(len(p) - n)
			c = min(c, b.left)
			for i := range c {
				p[n+int(i)] = 'a'
			}
			b.left -= c
			n += int(c)
		case b.tailPos < len(b.tail):
			c := copy(p[n:], b.tail[b.tailPos:])
			b.tailPos += c
			n += c
		default:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
	}
	return n, nil
}

// Issue 8, input 7: a body over the limit (32 MiB) is a 413 in the route's envelope when it is
// sent chunked too (no Content-Length), not a 400 quoting the read error.
func TestChunkedBodyOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	db := pgtestNewMigratedDB(t)
	g := StartGateway(t, db, "big", GatewayOpts{})
	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": "m", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}})
	require.Equal(t, 200, st, "%s", b)

	send := func(path, head string, size int64) (int, []byte) {
		req, err := http.NewRequest("POST", g.URL+path, newBigBody(head, size))
		require.NoError(t, err)
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
		req.Header.Set("Authorization", "Bearer "+MasterKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		require.NoError(t, err, path)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, out
	}
	const msg = "request body too large (limit 33554432 bytes)"

	st, b = send("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`, 60<<20)
	require.Equal(t, 413, st, "%s", b)
	require.Equal(t, msg, gjson.GetBytes(b, "error.message").String(), "%s", b)
	require.Equal(t, "413", gjson.GetBytes(b, "error.code").String())

	st, b = send("/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"`, 40<<20)
	require.Equal(t, 413, st, "%s", b)
	require.Equal(t, "error", gjson.GetBytes(b, "type").String(), "%s", b)
	require.Equal(t, "request_too_large", gjson.GetBytes(b, "error.type").String(), "%s", b)

	st, b = send("/key/generate", `{"key_alias":"`, 40<<20)
	require.Equal(t, 413, st, "%s", b)
	require.Equal(t, msg, gjson.GetBytes(b, "error.message").String(), "%s", b)

	st, b = send("/guardrails", `{"guardrail":{"guardrail_name":"`, 40<<20)
	require.Equal(t, 413, st, "%s", b)
	require.Equal(t, msg, gjson.GetBytes(b, "detail.error").String(), "%s", b)
	require.Zero(t, agScalar[int](t, db, "SELECT count(*)::int FROM gateway.api_keys"))
	require.Zero(t, agScalar[int](t, db, "SELECT count(*)::int FROM gateway.guardrails"))

	// a chunked body under the limit is served
	st, b = send("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`, 1<<20)
	require.Equal(t, 200, st, "%s", b)
}

// metricValue reads one series of lockstep_http_requests_total from /metrics (0 when absent).
func metricValue(t *testing.T, g *Gateway, route, method, status string) string {
	t.Helper()
	_, b := g.Do(t, "GET", "/metrics", nil)
	re := regexp.MustCompile(`(?m)^lockstep_http_requests_total\{method="` + regexp.QuoteMeta(method) + `",route="` + regexp.QuoteMeta(route) + `",status="` + status + `"\} (\S+)$`)
	if m := re.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return "0"
}

// Issue 8, input 10: a client that hangs up mid-call (before the answer, or in the middle of a
// stream) is logged at info and counted as 499, never as a 5xx; an unknown HTTP method is
// counted under method "other", so no request can create a new series.
func TestClientHangUpIs499AndMethodsShareOneLabel(t *testing.T) {
	t.Parallel()
	// an upstream that holds every call until its caller gives up
	got := make(chan struct{}, 4)
	release := make(chan struct{})
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets net/http notice the caller leaving
		got <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hold.Close)
	t.Cleanup(func() { close(release) })
	slow := fakeupstream.Start(t, fakeupstream.WithStreamChunks(50), fakeupstream.WithChunkDelay(100*time.Millisecond))

	db := pgtestNewMigratedDB(t)
	g := StartGateway(t, db, "hangup", GatewayOpts{})
	for name, base := range map[string]string{"held": hold.URL, "slow": slow.URL} {
		st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": name,
			"litellm_params": map[string]any{"model": "openai/x", "api_base": base + "/v1", "api_key": "sk-up"}})
		require.Equal(t, 200, st, "%s", b)
	}

	// hang up while the gateway waits for the upstream
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"held","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+MasterKey)
	errc := make(chan error, 1)
	go func() {
		resp, err := httpClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-got
	cancel()
	require.Error(t, <-errc)
	Eventually(t, "the hang-up is counted as 499", func() bool {
		return metricValue(t, g, "/v1/chat/completions", "POST", "499") == "1"
	})

	// hang up in the middle of a stream
	req, _ = http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+MasterKey)
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "), line)
	resp.Body.Close() // closes the connection: the stream is not read to the end
	Eventually(t, "the stream hang-up is counted as 499", func() bool {
		return metricValue(t, g, "/v1/chat/completions", "POST", "499") == "2"
	})
	for _, st := range []string{"500", "502", "503", "504", "200"} {
		require.Equal(t, "0", metricValue(t, g, "/v1/chat/completions", "POST", st), "status %s counted", st)
	}
	// the log is buffered (written every 100 ms): wait for both access lines
	var log string
	Eventually(t, "both hang-ups are logged", func() bool {
		log = g.Log()
		return strings.Count(log, `"status":499`) == 2
	})
	require.NotContains(t, log, "internal error")
	for l := range strings.Lines(log) {
		if strings.Contains(l, `"status":499`) {
			require.Contains(t, l, `"level":"info"`, l)
		}
	}

	// unknown methods share one label
	for i := range 5 {
		st, _ := g.Do(t, fmt.Sprintf("X%d", i), "/health/liveliness", nil)
		require.Equal(t, 405, st)
	}
	_, b := g.Do(t, "GET", "/metrics", nil)
	require.NotContains(t, string(b), `method="X0"`)
	require.Contains(t, string(b), `method="other"`)
}
