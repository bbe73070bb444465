package router

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
)

// A request refused before any call (*format.RequestError) is classified, retried and
// counted exactly as the 400 *format.UpstreamError of type invalid_request_error it used to
// be: the same class (by LiteLLM's message texts, a context window among them), no retries
// without a policy entry, the BadRequestError policy entry when there is one.
func TestRequestErrorClassifiedAsTheFormer400(t *testing.T) {
	t.Parallel()
	settings := []Settings{
		{NumRetries: 3},
		{NumRetries: 3, RetryPolicy: map[Class]int{ClassBadRequest: 2}},
		{NumRetries: 3, RetryPolicy: map[Class]int{ClassContextWindow: 1}},
	}
	for _, msg := range []string{
		"input: must be a non-empty string or array",
		"messages: This model's maximum context length is 10",
		"prompt: content policy",
	} {
		was := &format.UpstreamError{Status: 400, Message: msg, Type: "invalid_request_error"}
		now := format.BadRequest("%s", msg)
		for _, pair := range [][2]error{{was, now}, {fmt.Errorf("w: %w", was), fmt.Errorf("w: %w", now)}} {
			c := Classify(pair[0])
			require.Equal(t, c, Classify(pair[1]), msg)
			for _, s := range settings {
				r := &Router{settings: s}
				require.Equal(t, r.retriesFor(context.Background(), c, pair[0]), r.retriesFor(context.Background(), c, pair[1]), "%s %+v", msg, s)
			}
		}
	}
	require.Equal(t, ClassBadRequest, Classify(format.BadRequest("x")))
}
