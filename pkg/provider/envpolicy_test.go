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
	t.Cleanup(func() { require.NoError(t, SetAllowedEnvSecrets(nil)) })

	v, err := resolveEnv("api_key", "os.environ/LOCKSTEP_POLICY_API_KEY")
	require.NoError(t, err)
	require.Equal(t, "sk-allowed", v)
	v, err = resolveEnv("api_key", "sk-literal")
	require.NoError(t, err)
	require.Equal(t, "sk-literal", v)
	for _, name := range []string{"DATABASE_URL", "LITELLM_MASTER_KEY", "GATEWAY_POLICY_API_KEY", "LOCKSTEP_POLICY_TOKEN", "HOME", ""} {
		_, err := resolveEnv("api_key", "os.environ/"+name)
		require.EqualError(t, err, "litellm_params.api_key: environment variable "+name+" is not allowed for database objects")
	}
	_, err = NewDeployment("m1", "m", []byte(`{"model":"openai/x","api_base":"os.environ/DATABASE_URL"}`))
	require.EqualError(t, err, "litellm_params.api_base: environment variable DATABASE_URL is not allowed for database objects")
	_, err = NewDeployment("m1", "m", []byte(`{"model":"openai/x","api_key":"k","extra_headers":{"X-Leak":"os.environ/LITELLM_MASTER_KEY"}}`))
	require.ErrorContains(t, err, "environment variable LITELLM_MASTER_KEY is not allowed for database objects")

	// allowed_env_secrets replaces the defaults; the gateway's own settings stay out of reach
	require.NoError(t, SetAllowedEnvSecrets([]string{"*"}))
	_, err = resolveEnv("api_key", "os.environ/LOCKSTEP_POLICY_TOKEN")
	require.NoError(t, err)
	for _, name := range []string{"DATABASE_URL", "LITELLM_MASTER_KEY", "GATEWAY_POLICY_API_KEY"} {
		_, err := resolveEnv("api_key", "os.environ/"+name)
		require.Error(t, err, name)
	}
	require.NoError(t, SetAllowedEnvSecrets([]string{}))
	_, err = resolveEnv("api_key", "os.environ/LOCKSTEP_POLICY_API_KEY")
	require.Error(t, err, "an empty list allows none")
	require.ErrorContains(t, SetAllowedEnvSecrets([]string{"OK_*", "[A-"}), `allowed_env_secrets[1]: "[A-" is not a glob pattern`)
}
