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
// *url.URL. The strings many deployments repeat are held once.
func TestEndpointParsedOnFirstUse(t *testing.T) {
	d, err := NewDeployment("m1", "grp", []byte(`{"model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:1/v1", "api_key": "sk-one-1234567890"}`))
	require.NoError(t, err)
	for i := range d.parsed {
		require.Nil(t, d.parsed[i].Load(), "endpoint %d parsed at build", i)
	}
	u := d.endpoint(format.FormatChat, false)
	want, err := url.Parse(d.urls[format.FormatChat])
	require.NoError(t, err)
	require.Equal(t, want, u)
	require.Same(t, u, d.endpoint(format.FormatChat, false))
	require.Nil(t, d.parsed[format.FormatEmbeddings].Load(), "only the endpoint called is parsed")

	d2, err := NewDeployment("m2", "grp", []byte(`{"model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:1/v1", "api_key": "sk-two-1234567890"}`))
	require.NoError(t, err)
	require.Equal(t, unsafe.StringData(d.ModelName), unsafe.StringData(d2.ModelName))
	require.Equal(t, unsafe.StringData(d.Model), unsafe.StringData(d2.Model))
	require.Equal(t, unsafe.StringData(d.urls[format.FormatChat]), unsafe.StringData(d2.urls[format.FormatChat]))
}
