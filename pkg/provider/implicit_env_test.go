package provider_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/provider"
)

// Implicit environment credentials (API.md "Security rules"): for a database object each
// provider's fallback obeys allowed_env_secrets with the explicit reference's text; a config
// object keeps it; an unset variable is no credential and nothing to refuse.
func TestImplicitEnvCredentials(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-implicit-0123456789")
	t.Setenv("AZURE_AD_TOKEN", "ad-implicit-0123456789")
	t.Setenv("GROQ_API_KEY", "")
	var b *provider.Builder
	openai := []byte(`{"model":"openai/x","api_base":"http://h/v1"}`)

	d, err := b.NewDeployment("m", "g", openai)
	require.NoError(t, err, "the default policy allows *_API_KEY")
	require.Equal(t, "sk-implicit-0123456789", d.APIKey)

	b = mustBuilder(t, provider.Policy{AllowedEnvSecrets: []string{"ALLOWED_*"}})
	for params, want := range map[string]string{
		string(openai): "litellm_params.api_key: environment variable OPENAI_API_KEY is not allowed for database objects",
		`{"model":"azure/dep","api_base":"http://h"}`:                                   "litellm_params.azure_ad_token: environment variable AZURE_AD_TOKEN is not allowed for database objects",
		`{"model":"bedrock/m","aws_region_name":"us-east-1"}`:                           "litellm_params.aws_secret_access_key: environment variable AWS_SECRET_ACCESS_KEY is not allowed for database objects",
		`{"model":"bedrock/m","aws_region_name":"us-east-1","aws_profile_name":"prod"}`: "environment variable AWS_SECRET_ACCESS_KEY is not allowed",
		`{"model":"vertex_ai/gemini-2.5-pro","vertex_project":"p"}`:                     "litellm_params.vertex_credentials: environment variable GOOGLE_APPLICATION_CREDENTIALS is not allowed for database objects",
	} {
		_, err := b.NewDeployment("m", "g", []byte(params))
		require.ErrorContains(t, err, want, params)
		d, err := b.NewConfigDeployment("m", "g", []byte(params))
		require.NoError(t, err, "config: %s", params)
		require.NotNil(t, d)
	}
	d, err = b.NewConfigDeployment("m", "g", openai)
	require.NoError(t, err)
	require.Equal(t, "sk-implicit-0123456789", d.APIKey)

	// unset or empty: no credential, nothing refused; an explicit key or a mock needs none
	_, err = b.NewDeployment("m", "g", []byte(`{"model":"groq/x"}`))
	require.NoError(t, err)
	for _, params := range []string{`{"model":"openai/x","api_key":"sk-explicit"}`, `{"model":"openai/x","mock_response":"hi"}`,
		`{"model":"azure/dep","api_base":"http://h","api_key":"az-explicit"}`, `{"model":"bedrock/m","aws_region_name":"us-east-1","mock_response":"hi"}`} {
		d, err := b.NewDeployment("m", "g", []byte(params))
		require.NoError(t, err, params)
		require.NotContains(t, provider.UpstreamHeader(d).Get("Authorization"), "implicit", params)
	}
	b = mustBuilder(t, provider.Policy{AllowedEnvSecrets: []string{"AWS_*", "GOOGLE_*"}})
	_, err = b.NewDeployment("m", "g", []byte(`{"model":"bedrock/m","aws_region_name":"us-east-1"}`))
	require.NoError(t, err, "allowed: the AWS default chain")
	_, err = b.NewDeployment("m", "g", []byte(`{"model":"vertex_ai/gemini-2.5-pro","vertex_project":"p"}`))
	require.NoError(t, err, "allowed: ADC")
	require.False(t, b.EnvSecretAllowed("LITELLM_SALT_KEY"), "the salt key is a gateway setting")
}
