package provider

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The secrets policy (API.md "Security rules"): an object stored in the database resolves
// "os.environ/NAME" only for names matching allowed_env_secrets (default *_API_KEY,
// *_API_BASE), never the gateway's own settings, with the contract's error text.
func TestEnvSecretsPolicy(t *testing.T) {
	t.Setenv("LOCKSTEP_POLICY_API_KEY", "sk-allowed")
	t.Setenv("LOCKSTEP_POLICY_TOKEN", "tok")
	t.Setenv("GATEWAY_POLICY_API_KEY", "sk-gateway-setting")
	t.Setenv("DATABASE_URL", "postgres://u:DBPASS@h/db")
	t.Setenv("LITELLM_MASTER_KEY", "sk-master")
	var b *Builder

	v, err := b.resolveEnv("api_key", "os.environ/LOCKSTEP_POLICY_API_KEY")
	require.NoError(t, err)
	require.Equal(t, "sk-allowed", v)
	v, err = b.resolveEnv("api_key", "sk-literal")
	require.NoError(t, err)
	require.Equal(t, "sk-literal", v)
	for _, name := range []string{"DATABASE_URL", "LITELLM_MASTER_KEY", "GATEWAY_POLICY_API_KEY", "LOCKSTEP_POLICY_TOKEN", "HOME", ""} {
		_, err := b.resolveEnv("api_key", "os.environ/"+name)
		require.EqualError(t, err, "litellm_params.api_key: environment variable "+name+" is not allowed for database objects")
	}
	_, err = b.NewDeployment("m1", "m", []byte(`{"model":"openai/x","api_base":"os.environ/DATABASE_URL"}`))
	require.EqualError(t, err, "litellm_params.api_base: environment variable DATABASE_URL is not allowed for database objects")
	_, err = b.NewDeployment("m1", "m", []byte(`{"model":"openai/x","api_key":"k","extra_headers":{"X-Leak":"os.environ/LITELLM_MASTER_KEY"}}`))
	require.ErrorContains(t, err, "environment variable LITELLM_MASTER_KEY is not allowed for database objects")

	// allowed_env_secrets replaces the defaults; the gateway's own settings stay out of reach
	b = mustBuilder(t, Policy{AllowedEnvSecrets: []string{"*"}})
	_, err = b.resolveEnv("api_key", "os.environ/LOCKSTEP_POLICY_TOKEN")
	require.NoError(t, err)
	for _, name := range []string{"DATABASE_URL", "LITELLM_MASTER_KEY", "GATEWAY_POLICY_API_KEY"} {
		_, err := b.resolveEnv("api_key", "os.environ/"+name)
		require.Error(t, err, name)
	}
	b = mustBuilder(t, Policy{AllowedEnvSecrets: []string{}})
	_, err = b.resolveEnv("api_key", "os.environ/LOCKSTEP_POLICY_API_KEY")
	require.Error(t, err, "an empty list allows none")
	_, err = NewBuilder(Policy{AllowedEnvSecrets: []string{"OK_*", "[A-"}})
	require.ErrorContains(t, err, `allowed_env_secrets[1]: "[A-" is not a glob pattern`)
}

// mustBuilder is NewBuilder for a policy the test knows is valid.
func mustBuilder(t *testing.T, p Policy) *Builder {
	t.Helper()
	b, err := NewBuilder(p)
	require.NoError(t, err)
	return b
}
