package keys_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"testing"

	"lockstep/pkg/keys"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// keyRows returns n gateway.api_keys rows shaped like the cold-start benchmark's
// (itest/coldstart_bench_test.go), as the feed's full load reads them (typed columns).
func keyRows(n int) []store.Row {
	rows := make([]store.Row, n)
	for i := range n {
		h := sha256.Sum256([]byte(fmt.Sprint("sk-bench-", i)))
		tok := hex.EncodeToString(h[:])
		alias, rpm, budget, every := fmt.Sprint("alias-", i), int64(100), 10.5, "30d"
		rows[i] = store.Row{Type: store.Key, ID: tok, Version: int64(2 * (i + 1)), Cols: &store.KeyCols{
			Token: tok, KeyAlias: &alias, Models: []string{fmt.Sprint("group-", i%100), fmt.Sprint("group-", (i+1)%100)},
			Metadata: []byte(fmt.Sprintf(`{"owner": "user-%d"}`, i%5000)), RPMLimit: &rpm, MaxBudget: &budget, BudgetDuration: &every,
		}}
	}
	return rows
}

// BenchmarkColdLoadKeys measures the in-process part of a cold start for keys: the initial
// reconcile of N rows into an empty key registry (build every Key on every core, publish
// once), and the heap it then holds per key.
//
//	go test ./pkg/keys/ -run '^$' -bench ColdLoadKeys -benchtime 1x -benchmem
func BenchmarkColdLoadKeys(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rows := keyRows(n)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r := registry.New(registry.Options[*keys.Key]{Type: store.Key, Build: keys.BuildRow})
				r.Reconcile(rows, r.Generation())
				if r.Len() != n {
					b.Fatalf("loaded %d of %d", r.Len(), n)
				}
				b.StopTimer()
				var after runtime.MemStats
				rows = nil // the registry holds what it needs; the rows go
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc)/float64(n), "heap-B/key")
				runtime.KeepAlive(r)
				b.StartTimer()
			}
		})
	}
}
