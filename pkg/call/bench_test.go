package call_test

import (
	"context"
	"net/http"
	"testing"

	"lockstep/pkg/call"
	"lockstep/pkg/format"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// mockPipeline is a pipeline over one mock deployment serving model group "mock" (no
// network, no database, no limits step).
func mockPipeline(b *testing.B) *call.Pipeline {
	models := registry.New(registry.Options[*router.Deployment]{Type: store.Model, Build: router.BuildRow, Names: router.Names})
	d, err := router.Build("m1", "mock", []byte(`{"model":"openai/x","mock_response":"hello"}`), nil)
	if err != nil {
		b.Fatal(err)
	}
	models.SetConfig(map[string]*router.Deployment{"m1": d})
	client := provider.NewClient()
	return &call.Pipeline{Router: router.New(models, client, router.Settings{NumRetries: -1}), Client: client,
		Guardrails: registry.New(registry.Options[*guardrail.Guardrail]{Type: store.Guardrail, Build: guardrail.BuildRow, Names: call.GuardrailNames}),
		IDs:        call.NewIDs("bench")}
}

// BenchmarkPipelineMock: the pipeline alone (Serve → Start → Do, LiteLLM's headers), without
// HTTP: the part of pkg/api's BenchmarkChatMock that moved here.
//
//	go test ./pkg/call -run '^$' -bench Pipeline -benchmem
func BenchmarkPipelineMock(b *testing.B) {
	p := mockPipeline(b)
	body := []byte(`{"model":"mock","messages":[{"role":"user","content":"hi"}]}`)
	ctx := context.Background()
	hdr := http.Header{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rf, err := call.ScanChecked(body)
		if err != nil {
			b.Fatal(err)
		}
		clear(hdr)
		sp := call.Spec{Format: format.FormatChat, Route: "chat", Model: "mock", Body: body, Header: hdr}
		_, err = p.Serve(ctx, sp, &rf, func(ctx context.Context, c *call.Call) error {
			res, err := c.Do(ctx)
			if err != nil {
				return err
			}
			c.SetHeaders(hdr, res)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
