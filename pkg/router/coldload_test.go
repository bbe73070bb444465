package router_test

import (
	"fmt"
	"runtime"
	"testing"

	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// BenchmarkColdLoadModels measures the in-process part of a cold start for models: the
// initial reconcile of N gateway.models rows (typed columns, shaped like
// itest/coldstart_bench_test.go's) into an empty registry, and the heap held per model.
//
//	go test ./pkg/router/ -run '^$' -bench ColdLoadModels -benchtime 1x -benchmem
func BenchmarkColdLoadModels(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rows := make([]store.Row, n)
			for i := range rows {
				id := fmt.Sprint("m-", i)
				rows[i] = store.Row{Type: store.Model, ID: id, Version: int64(2 * (i + 1)), Cols: &store.ModelCols{
					ModelID: id, ModelName: fmt.Sprint("group-", i%1000),
					LitellmParams: []byte(fmt.Sprintf(`{"model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:1/v1", "api_key": "sk-fake-%d", "rpm": 1000}`, i)),
					ModelInfo:     []byte(fmt.Sprintf(`{"id": "%s", "access_groups": ["ag-%d"]}`, id, i%10)),
				}}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r := registry.New(registry.Options[*router.Deployment]{Type: store.Model, Build: router.BuildRow, Names: router.Names})
				r.Reconcile(rows, r.Generation())
				if r.Len() != n {
					b.Fatalf("loaded %d of %d", r.Len(), n)
				}
				b.StopTimer()
				rows = nil
				var after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc)/float64(n), "heap-B/model")
				runtime.KeepAlive(r)
				b.StartTimer()
			}
		})
	}
}
