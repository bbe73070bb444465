package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"strings"
	"testing"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/provider"
)

// chatBody4K is a ~4 KB chat request whose model is the group name.
func chatBody4K() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"group-openai","temperature":0.2,"messages":[{"role":"system","content":"You are terse."}`)
	for i := 0; b.Len() < 4000; i++ {
		fmt.Fprintf(&b, `,{"role":"user","content":"message %d: the quick brown fox jumps over the lazy dog"}`, i)
	}
	b.WriteString(`],"metadata":{"trace":"abc"}}`)
	return []byte(b.String())
}

// BenchmarkPassthroughChat is one non-streaming chat call through Client.Do against the fake
// upstream on loopback (same process: the fake's own allocations are counted too). The
// raw_net_http sub-benchmark is the floor: the same POST with a bare net/http client.
func BenchmarkPassthroughChat(b *testing.B) {
	s := fakeupstream.Start(b)
	d := deployment(b, s, "openai", "")
	body := chatBody4K()
	ctx := context.Background()

	b.Run("provider", func(b *testing.B) {
		c := provider.NewClient()
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			res, err := c.Do(ctx, d, format.FormatChat, body)
			if err != nil || res.Status != 200 {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw_net_http", func(b *testing.B) {
		hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		up, _ := format.RewriteModel(body, "gpt-up")
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/chat/completions", bytes.NewReader(up))
			req.Header.Set("Authorization", "Bearer sk-up-openai")
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkRewriteModel is the passthrough model edit alone on a ~4 KB body.
func BenchmarkRewriteModel(b *testing.B) {
	body := chatBody4K()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		out, err := format.RewriteModel(body, "gpt-4o-mini-2024-07-18")
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}
