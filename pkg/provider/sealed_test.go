package provider

import (
	"lockstep/pkg/format"

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
	err = d.redactErr(&format.UpstreamError{Status: 401, Message: "bad: cookie-one-0123 cookie-two-4567 plain-value-0123456 tok-0123456789 a=cookie-one-0123; b=cookie-two-4567"})
	for _, s := range []string{"cookie-one-0123", "cookie-two-4567", "plain-value-0123456", "tok-0123456789"} {
		require.NotContains(t, err.Error(), s)
	}
	require.NotContains(t, d.redactAny(errors.New("Get: sk-0123456789")).Error(), "sk-0123456789")
}
