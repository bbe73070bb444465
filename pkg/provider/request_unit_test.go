package provider

import (
	"lockstep/pkg/format"

	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// newUpstreamRequest builds the request http.NewRequestWithContext builds, from the endpoint
// parsed once.
func TestNewUpstreamRequestMatchesNewRequest(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m","messages":[]}`)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, 1)
	for _, base := range []string{"http://up.example/v1", "https://up.example:8443/v1", "http://up.example:/v1", "http://[::1]:9/v1", "http://[::1]:/v1", "http://u:p@up.example/v1"} {
		d, err := NewDeployment("id", "g", []byte(`{"model":"openai/m","api_key":"k","api_base":"`+base+`"}`))
		require.NoError(t, err, base)
		require.NotNil(t, d.endpoint(format.FormatChat, false), base)
		got, err := newUpstreamRequest(ctx, d, d.url(format.FormatChat, false), d.endpoint(format.FormatChat, false), body)
		require.NoError(t, err)
		want, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url(format.FormatChat, false), bytes.NewReader(body))
		require.NoError(t, err)
		require.Equal(t, want.Method, got.Method)
		require.Equal(t, want.URL.String(), got.URL.String(), base)
		require.Equal(t, want.Host, got.Host, base)
		require.Equal(t, want.URL.Host, got.URL.Host, base)
		require.Equal(t, want.Proto, got.Proto)
		require.Equal(t, want.ContentLength, got.ContentLength)
		require.Equal(t, 1, got.Context().Value(key{}))
		b, err := io.ReadAll(got.Body)
		require.NoError(t, err)
		require.Equal(t, body, b)
		for range 2 { // the transport may replay the body more than once
			rc, err := got.GetBody()
			require.NoError(t, err)
			b, err = io.ReadAll(rc)
			require.NoError(t, err)
			require.Equal(t, body, b)
		}
	}
}
