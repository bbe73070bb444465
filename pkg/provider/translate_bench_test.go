package provider_test

import (
	"context"
	"lockstep/pkg/format"
	"testing"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/provider"
)

// BenchmarkTranslateChatToAnthropic is one non-streaming ~4 KB chat call through Client.Do to
// an Anthropic deployment (the fake upstream on loopback): request and answer translated.
func BenchmarkTranslateChatToAnthropic(b *testing.B) {
	s := fakeupstream.Start(b)
	d := deployment(b, s, "anthropic", "")
	body := chatBody4K()
	ctx := context.Background()
	c := provider.NewClient()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		res, err := c.Do(ctx, d, format.FormatChat, body)
		if err != nil || res.Status != 200 {
			b.Fatal(err)
		}
	}
}
