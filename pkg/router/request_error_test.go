package router_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
	"lockstep/pkg/router"
)

// A deployment refusing the client's request before any call (a mock embedding without
// input) fails the routed call at once: class bad_request, one attempt, the RequestError in
// the chain, and no other deployment tried (as when it was a 400 UpstreamError).
func TestRoutedRequestErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	r, g := build(t, router.Settings{NumRetries: 3}, mock("a", ""), mock("b", ""))
	_, _, err := r.Do(context.Background(), g, format.FormatEmbeddings, []byte(`{"model":"grp","input":[]}`))
	var re *router.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, router.ClassBadRequest, re.Class)
	require.Equal(t, 1, re.Attempts)
	var fe *format.RequestError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "input: must be a non-empty string or array", fe.Message)
	require.Empty(t, r.Cooldowns())
}
