package sidebyside

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"lockstep/pkg/a2a"
	"lockstep/pkg/api"
	"lockstep/pkg/call"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/keys"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// BenchmarkProxied: one call through the API handler in process (no listener in front of
// it: httptest request and recorder), with a virtual key, proxied over loopback to the fake
// upstream in its own process, so allocs/op counts the gateway's work only — the handler,
// middleware, routing, access log, metrics and the upstream HTTP client — and none of the
// upstream's. The access log is written at info level to a discarding writer.
//
//	go test ./bench/sidebyside/ -run '^$' -bench Proxied -benchmem
func BenchmarkProxied(b *testing.B) {
	up, err := startUpstreamProcess()
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	models := registry.New(registry.Options[*router.Deployment]{Type: store.Model, Build: router.BuildRow, Names: router.Names})
	guardrails := registry.New(registry.Options[*guardrail.Guardrail]{Type: store.Guardrail, Build: guardrail.BuildRow, Names: call.GuardrailNames})
	agents := registry.New(registry.Options[*a2a.Agent]{Type: store.Agent, Build: a2a.BuildRow, Names: api.AgentNames})
	vkeys := registry.New(registry.Options[*keys.Key]{Type: store.Key, Build: keys.BuildRow})
	deps := map[string]*router.Deployment{}
	for _, m := range []struct{ name, upstream string }{{"bench-chat", "gpt-bench"}, {"bench-embed", "text-embedding-bench"}} {
		d, err := router.Build(m.name+"-1", m.name, fmt.Appendf(nil, `{"model":"openai/%s","api_base":%q,"api_key":%q}`, m.upstream, up.URL+"/v1", upstreamKey), nil)
		if err != nil {
			b.Fatal(err)
		}
		deps[m.name+"-1"] = d
	}
	models.SetConfig(deps)
	const vkey = "sk-bench-virtual"
	vkeys.SetConfig(map[string]*keys.Key{keys.Hash(vkey): {Token: keys.Hash(vkey)}})
	client := provider.NewClient()
	defer client.CloseIdleConnections()
	srv := api.New(api.Deps{
		ReplicaID: "bench", MasterKey: masterKey, Router: router.New(models, client, router.Settings{}), Client: client,
		Guardrails: guardrails, Agents: agents, Keys: vkeys, Log: zerolog.New(discard{}).Level(zerolog.InfoLevel),
	})
	h := srv.Handler()
	for _, w := range workloads() {
		b.Run(w.name, func(b *testing.B) {
			s := w.gateway
			call := func() {
				req := httptest.NewRequest(http.MethodPost, s.path, bytes.NewReader(s.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+vkey)
				for k, v := range s.header {
					req.Header.Set(k, v)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(w.want)) {
					b.Fatalf("%s: %d %s", w.name, rec.Code, rec.Body)
				}
			}
			call() // warm: connection, caches
			// the benchmark's own request and recorder, measured alone, are not the gateway's
			own := testing.AllocsPerRun(100, func() {
				req := httptest.NewRequest(http.MethodPost, s.path, bytes.NewReader(s.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+vkey)
				for k, v := range s.header {
					req.Header.Set(k, v)
				}
				_ = httptest.NewRecorder()
			})
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				call()
			}
			b.StopTimer()
			b.ReportMetric(own, "harness-allocs/op")
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
