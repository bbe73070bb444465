package provider

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
)

// A request refused before any call keeps its type through redaction and has the
// deployment's secrets removed from its message, as the 400 UpstreamError it used to be did.
func TestRequestErrorRedactedKeepingItsType(t *testing.T) {
	t.Parallel()
	const key = "sk-REALKEY-0123456789"
	d, err := NewDeployment("id", "g", []byte(fmt.Sprintf(`{"model":"openai/m","api_key":%q}`, key)))
	require.NoError(t, err)
	for _, redact := range []func(error) error{d.redactErr, d.redactAny} {
		out := redact(fmt.Errorf("w: %w", format.BadRequest("messages: %s is not a model", key)))
		var re *format.RequestError
		require.True(t, errors.As(out, &re), "%T", out)
		require.Equal(t, "messages: sk****6789 is not a model", re.Message)
		clean := format.BadRequest("messages: nothing secret")
		require.Same(t, clean, redact(clean))
	}
	var ue *format.UpstreamError
	require.False(t, errors.As(d.redactErr(format.BadRequest("x")), &ue))
	// a refusal met on the transport path is passed through, not made a 502
	in := format.BadRequest("x")
	require.Same(t, in, transportError(t.Context(), fmt.Errorf("send: %w", in), 0, "call"))
}
