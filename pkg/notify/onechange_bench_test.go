package notify_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
)

// BenchmarkNotifyOneChange: one model row inserted per iteration (its own transaction, as an
// admin's write), until the replica applied it — the propagation benchmark's path (notification,
// inline re-read on the listener connection, publish) in one process. Reports the heap
// allocated per change by the whole process, the writer's statement included (run with
// -memprofile and pprof -focus notify to see the replica's share).
//
//	go test ./pkg/notify/ -run '^$' -bench OneChange -benchtime 2000x -memprofile /tmp/mem.out
func BenchmarkNotifyOneChange(b *testing.B) {
	ctx := context.Background()
	reg, admin := benchReplica(b, notify.SourceListen)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := admin.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ($1, $1, '{"model": "openai/x", "mock_response": "ok"}')`, fmt.Sprint("one-", i))
		require.NoError(b, err)
		for reg.Len() < i+1 {
			time.Sleep(20 * time.Microsecond)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N), "heap-B/change")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "mallocs/change")
}
