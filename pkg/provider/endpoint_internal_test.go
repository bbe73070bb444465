package provider

import (
	"net/url"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
)

// A deployment parses an endpoint on its first call through it, not when built (a replica
// holds 100,000 deployments and calls few), and keeps the parse: later calls get the same
// *url.URL. Its request headers are kept as pairs and made a map on first use too. The
// strings many deployments repeat are held once, and none is a slice of the litellm_params
// text (the secrets to redact share the cloned key).
func TestEndpointParsedOnFirstUse(t *testing.T) {
	d, err := NewDeployment("m1", "grp", []byte(`{"model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:1/v1", "api_key": "sk-one-1234567890"}`))
	require.NoError(t, err)
	require.Nil(t, d.parsed.Load(), "endpoints parsed at build")
	require.Nil(t, d.hdrMap.Load(), "header map made at build")
	require.Equal(t, "Bearer sk-one-1234567890", d.headers().Get("Authorization"))
	require.Equal(t, "application/json", d.headers().Get("Content-Type"))
	require.Same(t, d.hdrMap.Load(), d.hdrMap.Load())
	u := d.endpoint(format.FormatChat, false)
	want, err := url.Parse(d.urls[format.FormatChat])
	require.NoError(t, err)
	require.Equal(t, want, u)
	require.Same(t, u, d.endpoint(format.FormatChat, false))
	require.Nil(t, d.parsed.Load()[format.FormatEmbeddings].Load(), "only the endpoint called is parsed")

	d2, err := NewDeployment("m2", "grp", []byte(`{"model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:1/v1", "api_key": "sk-two-1234567890"}`))
	require.NoError(t, err)
	require.Equal(t, unsafe.StringData(d.ModelName), unsafe.StringData(d2.ModelName))
	require.Equal(t, unsafe.StringData(d.Model), unsafe.StringData(d2.Model))
	require.Equal(t, unsafe.StringData(d.urls[format.FormatChat]), unsafe.StringData(d2.urls[format.FormatChat]))
	require.Equal(t, unsafe.StringData(d.APIKey), unsafe.StringData(d.secrets[0]))
}
