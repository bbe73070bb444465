package call

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
)

// A body the text mapping refuses (a *format.RequestError) leaves inputErr as it is, as the
// 400 UpstreamError it used to be did; any other error becomes an *Invalid.
func TestInputErrKeepsRequestErrors(t *testing.T) {
	t.Parallel()
	re := format.BadRequest("messages: must be an array")
	require.Same(t, re, inputErr(re))
	ue := &format.UpstreamError{Status: 400, Message: "x"}
	require.Same(t, ue, inputErr(ue))
	var in *Invalid
	require.ErrorAs(t, inputErr(errors.New("bad")), &in)
	require.Equal(t, "bad", in.Msg)
	require.NoError(t, inputErr(nil))
}
