package provider

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
)

func TestAzureDeployment(t *testing.T) {
	t.Parallel()
	d, err := NewDeployment("id", "grp", []byte(`{"model":"azure/my dep","api_base":"https://r.openai.azure.com/","api_key":"azure-key-123456","api_version":"2025-01-01-preview"}`))
	require.NoError(t, err)
	require.Equal(t, "https://r.openai.azure.com/openai/deployments/my%20dep/chat/completions?api-version=2025-01-01-preview", d.urls[format.FormatChat])
	require.Equal(t, "https://r.openai.azure.com/openai/deployments/my%20dep/audio/transcriptions?api-version=2025-01-01-preview", d.urls[format.FormatTranscriptions])
	require.Equal(t, "azure-key-123456", d.headers().Get("api-key"))
	require.Empty(t, d.headers().Get("Authorization"))
	require.False(t, d.Supports(format.FormatModerations))
	require.True(t, d.Supports(format.FormatResponses))
	up, pass, err := plan(d, format.FormatResponses)
	require.NoError(t, err)
	require.True(t, pass, "Azure serves the Responses API itself")
	require.Equal(t, format.FormatResponses, up)
	require.Equal(t, "https://r.openai.azure.com/openai/responses?api-version=2025-01-01-preview", d.urls[format.FormatResponses])
	out, _, err := upstreamBody(d, format.FormatResponses, up, pass, false, []byte(`{"model":"grp","input":"hi"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"my dep","input":"hi"}`, string(out), "the deployment goes in the body")
	_, pass, err = plan(d, format.FormatMessages)
	require.NoError(t, err)
	require.False(t, pass, "messages are translated to chat")
	for version, want := range map[string]string{
		"preview": "https://r.openai.azure.com/openai/v1/responses?api-version=preview",
		"latest":  "https://r.openai.azure.com/openai/v1/responses?api-version=latest",
		"v1":      "https://r.openai.azure.com/openai/v1/responses",
	} {
		dv, err := NewDeployment("id", "grp", []byte(`{"model":"azure/dep","api_base":"https://r.openai.azure.com","api_key":"k","api_version":"`+version+`"}`))
		require.NoError(t, err)
		require.Equal(t, want, dv.urls[format.FormatResponses], version)
	}

	d, err = NewDeployment("id", "grp", []byte(`{"model":"azure/dep","api_base":"https://r.openai.azure.com/openai","azure_ad_token":"Bearer eyJ0eXAiOiJKV1Qi"}`))
	require.NoError(t, err)
	require.Equal(t, "https://r.openai.azure.com/openai/deployments/dep/chat/completions?api-version="+DefaultAzureAPIVersion, d.urls[format.FormatChat])
	require.Equal(t, "https://r.openai.azure.com/openai/v1/responses?api-version=preview", d.urls[format.FormatResponses], "no api_version: LiteLLM's default for responses")
	require.Equal(t, "Bearer eyJ0eXAiOiJKV1Qi", d.headers().Get("Authorization"))
	require.Equal(t, "x ey****V1Qi", d.Redact("x eyJ0eXAiOiJKV1Qi"))

	_, err = NewDeployment("id", "grp", []byte(`{"model":"azure/dep","api_base":"https://r.openai.azure.com"}`))
	require.ErrorContains(t, err, "litellm_params.api_key (or azure_ad_token, or AZURE_API_KEY) is required for provider \"azure\"")
	_, err = NewDeployment("id", "grp", []byte(`{"model":"azure/dep","api_key":"k"}`))
	require.ErrorContains(t, err, `litellm_params.api_base is required for provider "azure"`)
}

func TestUnsupportedRouteNamesProvider(t *testing.T) {
	t.Parallel()
	d, err := NewDeployment("id", "grp", []byte(`{"model":"anthropic/claude-x","api_key":"k"}`))
	require.NoError(t, err)
	_, err = NewClient().Do(context.Background(), d, format.FormatImages, []byte(`{"model":"grp","prompt":"x"}`))
	var ue *format.RequestError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 400, ue.Status())
	require.Equal(t, "/images/generations not supported by provider anthropic", ue.Message)
}

func TestMockCompletions(t *testing.T) {
	t.Parallel()
	d, err := NewDeployment("id", "grp", []byte(`{"model":"openai/x","mock_response":"hello there"}`))
	require.NoError(t, err)
	res, err := NewClient().Do(context.Background(), d, format.FormatCompletions, []byte(`{"model":"grp","prompt":"x"}`))
	require.NoError(t, err)
	require.Equal(t, "text_completion", gjson.GetBytes(res.Body, "object").Str)
	require.Equal(t, "hello there", gjson.GetBytes(res.Body, "choices.0.text").Str)
	require.Equal(t, format.Usage{PromptTokens: 10, CompletionTokens: 20}, res.Usage)
	st, err := NewClient().Stream(context.Background(), d, format.FormatCompletions, []byte(`{"model":"grp","prompt":"x","stream":true}`))
	require.NoError(t, err)
	var all strings.Builder
	for {
		ev, err := st.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		all.Write(ev.Data)
	}
	require.Contains(t, all.String(), `"object":"text_completion"`)
	require.True(t, strings.HasSuffix(all.String(), "data: [DONE]\n\n"))
	require.False(t, d.Supports(format.FormatImages))
}
