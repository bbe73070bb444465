package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Credentials at rest (API.md "Security rules"): SealParams seals exactly the credential
// fields, keeps every other byte, is idempotent, leaves references clear; NewDeployment opens
// them; another key, a missing key, an altered value or a value moved to another field is an
// error naming the field, never an empty credential.
func TestSealParams(t *testing.T) {
	var b *Builder
	in := []byte(`{"model":"openai/x","api_base":"http://h/v1","api_key":"sk-seal-0123456789","aws_session_token":"os.environ/TOK",` +
		`"extra_headers":{"Cookie":"session=abc123456","X-Empty":""},"timeout":5}`)
	require.Equal(t, string(in), string(b.SealParams(in)), "no key: as is")

	b = mustBuilder(t, Policy{SaltKey: "key-one"})
	out := b.SealParams(in)
	require.NotContains(t, string(out), "sk-seal-0123456789")
	require.NotContains(t, string(out), "abc123456")
	p := gjson.ParseBytes(out)
	for _, f := range []string{"api_key", "extra_headers.Cookie"} {
		require.True(t, IsSealed(p.Get(f).Str), f)
	}
	for f, want := range map[string]string{"model": "openai/x", "api_base": "http://h/v1", "aws_session_token": "os.environ/TOK", "extra_headers.X-Empty": "", "timeout": "5"} {
		require.Equal(t, want, p.Get(f).String(), f)
	}
	require.Equal(t, string(out), string(b.SealParams(out)), "sealed values are not sealed again")
	require.NotEqual(t, string(out), string(b.SealParams(in)), "a fresh nonce per value")

	d, err := b.NewDeployment("m", "g", out)
	require.NoError(t, err)
	require.Equal(t, "sk-seal-0123456789", d.APIKey)
	require.Equal(t, "session=abc123456", d.ExtraHeaders["Cookie"])

	// a value moved to another field does not open (the field is the additional data)
	moved := strings.Replace(string(out), `"api_key"`, `"azure_ad_token_x"`, 1)
	moved = strings.Replace(moved, `"model":"openai/x"`, `"model":"openai/x","api_key":`+p.Get("extra_headers.Cookie").Raw, 1)
	_, err = b.NewDeployment("m", "g", []byte(moved))
	require.ErrorIs(t, err, ErrSealedWrongKey)

	altered := []byte(strings.Replace(string(out), p.Get("api_key").Str, p.Get("api_key").Str[:len(p.Get("api_key").Str)-2]+"AA", 1))
	_, err = b.NewDeployment("m", "g", altered)
	require.ErrorIs(t, err, ErrSealedWrongKey)

	b = mustBuilder(t, Policy{SaltKey: "key-two"})
	_, err = b.NewDeployment("m", "g", out)
	require.ErrorIs(t, err, ErrSealedWrongKey)
	require.EqualError(t, err, "litellm_params.api_key cannot be decrypted with the configured salt key (LITELLM_SALT_KEY / GATEWAY_SALT_KEY): it was encrypted with another key or altered")

	b = mustBuilder(t, Policy{SaltKey: ""})
	_, err = b.NewDeployment("m", "g", out)
	require.True(t, errors.Is(err, ErrSealedNoKey))
	require.EqualError(t, err, "litellm_params.api_key is encrypted at rest but neither LITELLM_SALT_KEY nor GATEWAY_SALT_KEY is set")
}

// Implicit environment credentials (API.md "Security rules"): for a database object each
// provider's fallback obeys allowed_env_secrets with the explicit reference's text; a config
// object keeps it; an unset variable is no credential and nothing to refuse.
func TestImplicitEnvCredentials(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-implicit-0123456789")
	t.Setenv("AZURE_AD_TOKEN", "ad-implicit-0123456789")
	t.Setenv("GROQ_API_KEY", "")
	var b *Builder
	openai := []byte(`{"model":"openai/x","api_base":"http://h/v1"}`)

	d, err := b.NewDeployment("m", "g", openai)
	require.NoError(t, err, "the default policy allows *_API_KEY")
	require.Equal(t, "sk-implicit-0123456789", d.APIKey)

	b = mustBuilder(t, Policy{AllowedEnvSecrets: []string{"ALLOWED_*"}})
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
		require.NotContains(t, d.header.Get("Authorization"), "implicit", params)
	}
	b = mustBuilder(t, Policy{AllowedEnvSecrets: []string{"AWS_*", "GOOGLE_*"}})
	_, err = b.NewDeployment("m", "g", []byte(`{"model":"bedrock/m","aws_region_name":"us-east-1"}`))
	require.NoError(t, err, "allowed: the AWS default chain")
	_, err = b.NewDeployment("m", "g", []byte(`{"model":"vertex_ai/gemini-2.5-pro","vertex_project":"p"}`))
	require.NoError(t, err, "allowed: ADC")
	require.False(t, b.EnvSecretAllowed("LITELLM_SALT_KEY"), "the salt key is a gateway setting")
}

// Every extra_headers value is a credential: masked in /model/info whatever its name, and
// scrubbed (whole, after a scheme, each cookie value) from upstream error texts.
func TestExtraHeadersRedacted(t *testing.T) {
	params := []byte(`{"model":"openai/x","api_base":"http://h/v1","api_key":"sk-0123456789",` +
		`"extra_headers":{"Cookie":"a=cookie-one-0123; b=cookie-two-4567","X-Plain":"plain-value-0123456","Authorization":"Token tok-0123456789"}}`)
	m := gjson.ParseBytes(MaskParams(params))
	for _, h := range []string{"Cookie", "X-Plain", "Authorization"} {
		require.Contains(t, m.Get("extra_headers."+h).Str, "****", h)
	}
	d, err := NewDeployment("m", "g", params)
	require.NoError(t, err)
	err = d.redactErr(&UpstreamError{Status: 401, Message: "bad: cookie-one-0123 cookie-two-4567 plain-value-0123456 tok-0123456789 a=cookie-one-0123; b=cookie-two-4567"})
	for _, s := range []string{"cookie-one-0123", "cookie-two-4567", "plain-value-0123456", "tok-0123456789"} {
		require.NotContains(t, err.Error(), s)
	}
	require.NotContains(t, d.redactAny(errors.New("Get: sk-0123456789")).Error(), "sk-0123456789")
}
