package bedrock

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// Issue 19 item 13: sagemaker/<endpoint> (LiteLLM's example config) is served through
// InvokeEndpoint, signed for service sagemaker: a chat call becomes the text-generation
// body and comes back as chat, plain and as a stream of the one answer.
func TestSageMaker(t *testing.T) {
	t.Parallel()
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/endpoints/my-llama-ep/invocations", r.URL.Path)
		require.Contains(t, r.Header.Get("Authorization"), "/us-east-1/sagemaker/aws4_request")
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		_, _ = io.WriteString(w, `[{"generated_text":"Hello there"}]`)
	}))
	defer srv.Close()
	pb, err := provider.NewBuilder(provider.Policy{}, SageMakerVendor)
	require.NoError(t, err)
	d, err := pb.NewDeployment("id", "sm", []byte(`{"model":"sagemaker/my-llama-ep","api_base":"`+srv.URL+`","aws_region_name":"us-east-1","aws_access_key_id":"AKIDUNIT","aws_secret_access_key":"unit-secret-0001"}`))
	require.NoError(t, err)
	res, err := provider.NewClient().Do(context.Background(), d, format.FormatChat,
		[]byte(`{"model":"sm","max_tokens":20,"temperature":0.1,"messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"Hi"}]}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"inputs":"Be kind.\n\nHi","parameters":{"max_new_tokens":20,"temperature":0.1}}`, bodies[0])
	require.Equal(t, "Hello there", gjson.GetBytes(res.Body, "choices.0.message.content").Str, "%s", res.Body)
	require.Equal(t, int64(3), gjson.GetBytes(res.Body, "usage.completion_tokens").Int())

	st, err := provider.NewClient().Stream(context.Background(), d, format.FormatChat, []byte(`{"model":"sm","stream":true,"messages":[{"role":"user","content":"Hi"}]}`))
	require.NoError(t, err)
	var all strings.Builder
	for {
		e, err := st.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		all.Write(e.Data)
	}
	require.Contains(t, all.String(), `"content":"Hello there"`)
	require.Contains(t, all.String(), `"finish_reason":"stop"`)
	require.JSONEq(t, `{"inputs":"Hi","parameters":{}}`, bodies[1])
}
