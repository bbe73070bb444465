package provider_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/provider"
)

// An upstream that echoes its request headers in an error shows the deployment's secrets in
// other shapes than as written: the Basic credential net/http sends for an api_base password
// (base64, decodes to the password), or a header value inside a JSON string, escaped by Go's
// encoding/json ("<" as \u003c), Python's json.dumps (non-ASCII as \u escapes), PHP ("/" as
// "\/"). Each is redacted like the value itself.
func TestRedactSecretsInEchoedShapes(t *testing.T) {
	t.Parallel()
	const pass = "UrlPass-0123456789"
	const hdr = `q"uote<SECRET-HDR>&val/x`
	const cookie = "Ünïcode-SECRET-cookie"
	params, err := json.Marshal(map[string]any{"model": "anthropic/claude-x", "api_key": "sk-ant-0123456789",
		"api_base":      "http://user:" + pass + "@127.0.0.1:9/v1",
		"extra_headers": map[string]string{"X-Secret": hdr, "Cookie": "sess=" + cookie}})
	require.NoError(t, err)
	d, err := provider.NewDeployment("id", "g", params)
	require.NoError(t, err)
	goJSON, err := json.Marshal(hdr)
	require.NoError(t, err)
	for name, echoed := range map[string]string{
		"basic":          "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+pass)),
		"go json":        string(goJSON),
		"python json":    `"q\"uote<SECRET-HDR>&val/x"`,
		"php json":       `"q\"uote<SECRET-HDR>&val\/x"`,
		"python cookie":  `"Cookie": "sess=\u00dcn\u00efcode-SECRET-cookie"`,
		"php cookie":     `"sess=\u00dcn\u00efcode-SECRET-cookie"`,
		"plain cookie":   "sess=" + cookie,
		"plain header":   hdr,
		"plain password": pass,
	} {
		out := d.Redact("upstream says: " + echoed)
		require.NotContains(t, out, "SECRET", "%s: %s", name, out)
		require.NotContains(t, out, pass, "%s: %s", name, out)
		require.NotContains(t, out, base64.StdEncoding.EncodeToString([]byte("user:" + pass))[:12], "%s: %s", name, out)
		require.True(t, strings.HasPrefix(out, "upstream says: "), "%s: %s", name, out)
	}
}
