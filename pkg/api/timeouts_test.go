package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/api"
	"lockstep/pkg/router"
)

// Issue 8, input 10: the HTTP server has read, write and idle timeouts, and a stream is not
// cut by them: a chat stream that lasts several times the read and write timeouts arrives
// whole, while a route that is not long-running, answering after the write timeout, is cut.
func TestServerTimeoutsSpareStreams(t *testing.T) {
	t.Parallel()
	const chunks = 12
	gap := 100 * time.Millisecond
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range chunks {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"},\"finish_reason\":null}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)

	timeout := 300 * time.Millisecond // the stream lasts 12 × 100 ms
	b := setupWith(t, func(d *api.Deps) { d.Timeouts = api.Timeouts{Read: timeout, Write: timeout} })
	b.models.SetConfig(map[string]*router.Deployment{"s1": mustDeployment(t, "s1", "slow",
		`{"model":"openai/x","api_base":"`+up.URL+`/v1","api_key":"sk-up"}`, "")})
	release := make(chan struct{})
	b.srv.Echo().GET("/test/late", func(c echo.Context) error {
		<-release
		return c.String(200, "late")
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.srv.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + ln.Addr().String()

	req, _ := http.NewRequest("POST", base+"/v1/chat/completions",
		strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-master")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			got = append(got, sc.Text())
		}
	}
	require.NoError(t, sc.Err())
	require.Equal(t, "data: [DONE]", got[len(got)-1], "the stream arrived whole")
	for i := range chunks {
		require.Contains(t, strings.Join(got, "\n"), fmt.Sprintf("w%d ", i))
	}

	// a route that is not long-running is cut by the write timeout: the client gets no answer
	req, _ = http.NewRequest("GET", base+"/test/late", nil)
	req.Header.Set("Authorization", "Bearer sk-master")
	go func() { time.Sleep(2 * timeout); close(release) }()
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp2, err := fresh.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp2.Body)
		resp2.Body.Close()
	}
	require.Error(t, err, "an answer written after the write timeout must not arrive")
}
