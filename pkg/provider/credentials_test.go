package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"lockstep/pkg/format"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/provider"
	"lockstep/pkg/provider/bedrock"
	"lockstep/pkg/provider/gemini"
	"lockstep/pkg/provider/vertex"
)

// Credential failures are not cached, successes are (until shortly before they expire): a
// transient failure fetching a Vertex AI token or an AWS credential fails that call only, the
// next call tries again; a fetched token or credential serves every later call.

const credChat = `{"model":"grp","messages":[{"role":"user","content":"hi"}]}`

func credCall(t *testing.T, d *provider.Deployment) error {
	t.Helper()
	_, err := provider.NewClient().Do(context.Background(), d, format.FormatChat, []byte(credChat))
	return err
}

// The fake token endpoint fails once: that call fails (502, retryable: another deployment may
// serve it), the next one fetches a token, and the token serves the calls after it.
func TestVertexTokenFailureNotCached(t *testing.T) {
	t.Parallel()
	vx := fakeupstream.StartVertex(t, "proj-cred")
	params, _ := json.Marshal(map[string]any{"model": "vertex_ai/gemini-2.5-pro", "api_base": vx.URL, "vertex_credentials": vx.ServiceAccountJSON()})
	d, err := mustBuilder(t, provider.Policy{}).NewDeployment("id", "grp", params)
	require.NoError(t, err)

	vx.FailTokens(1, http.StatusServiceUnavailable)
	err = credCall(t, d)
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 502, ue.Status, "%v", err)
	require.True(t, ue.Retryable)
	require.Contains(t, ue.Message, "vertex_ai: get access token")
	require.Equal(t, 0, vx.TokensIssued())

	for range 3 {
		require.NoError(t, credCall(t, d))
	}
	require.Equal(t, 1, vx.TokensIssued(), "the token is cached until near its expiry")
}

// Application Default Credentials not found yet (the key file is not mounted): the call fails,
// and once the file is there the next call finds them.
func TestVertexADCFailureNotCached(t *testing.T) {
	vx := fakeupstream.StartVertex(t, "proj-adc")
	path := filepath.Join(t.TempDir(), "adc.json")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	params, _ := json.Marshal(map[string]any{"model": "vertex_ai/gemini-2.5-pro", "api_base": vx.URL, "vertex_project": "proj-adc"})
	d, err := mustBuilder(t, provider.Policy{}).NewConfigDeployment("id", "grp", params)
	require.NoError(t, err)

	err = credCall(t, d)
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 401, ue.Status)
	require.Contains(t, ue.Message, "vertex_ai: no credentials")

	require.NoError(t, os.WriteFile(path, []byte(vx.ServiceAccountJSON()), 0o600))
	require.NoError(t, credCall(t, d), "ADC are looked up again after a failure")
	require.NoError(t, credCall(t, d))
	require.Equal(t, 1, vx.TokensIssued())
}

// awsEnv isolates the AWS default credential chain from the machine: no environment keys, no
// instance metadata, config and credentials files under dir.
func awsEnv(t *testing.T, dir string) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
}

// The AWS default chain: a profile that is not there yet fails the call; once the shared
// credentials file has it, the next call signs with it (the fake verifies the SigV4
// signature against those keys).
func TestBedrockChainLoadFailureNotCached(t *testing.T) {
	brc := fakeupstream.Bedrock{Region: "us-east-1", AccessKeyID: "AKIACREDTEST0001", SecretAccessKey: "cred/test/secret/0001"}
	br := fakeupstream.StartBedrock(t, brc)
	dir := t.TempDir()
	awsEnv(t, dir)
	params, _ := json.Marshal(map[string]any{"model": "bedrock/anthropic.claude-3-haiku-20240307-v1:0", "api_base": br.URL,
		"aws_region_name": brc.Region, "aws_profile_name": "lockstep-test"})
	d, err := mustBuilder(t, provider.Policy{}).NewConfigDeployment("id", "grp", params)
	require.NoError(t, err)

	err = credCall(t, d)
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 401, ue.Status)
	require.Contains(t, ue.Message, "bedrock: load AWS credentials")
	require.Empty(t, br.Requests())

	creds := fmt.Sprintf("[lockstep-test]\naws_access_key_id = %s\naws_secret_access_key = %s\n", brc.AccessKeyID, brc.SecretAccessKey)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "credentials"), []byte(creds), 0o600))
	require.NoError(t, credCall(t, d), "the AWS configuration is loaded again after a failure")
	require.NoError(t, credCall(t, d))
}

// The AWS default chain with a container credentials endpoint that is down: the call fails
// (502, retryable: the endpoint is unavailable, the credentials may be fine); once it answers, the next call gets credentials, and they serve later calls (one fetch).
func TestBedrockCredentialFailureNotCached(t *testing.T) {
	brc := fakeupstream.Bedrock{Region: "us-east-1", AccessKeyID: "ASIACREDTEST0002", SecretAccessKey: "cred/test/secret/0002", SessionToken: "cred-session-0002"}
	br := fakeupstream.StartBedrock(t, brc)
	var down atomic.Bool
	var fetched atomic.Int64
	down.Store(true)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"code":"ServiceUnavailable","message":"try later"}`, http.StatusServiceUnavailable)
			return
		}
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"AccessKeyId": brc.AccessKeyID, "SecretAccessKey": brc.SecretAccessKey,
			"Token": brc.SessionToken, "Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}))
	t.Cleanup(ep.Close)
	awsEnv(t, t.TempDir())
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", ep.URL+"/creds")
	params, _ := json.Marshal(map[string]any{"model": "bedrock/anthropic.claude-3-haiku-20240307-v1:0", "api_base": br.URL, "aws_region_name": brc.Region})
	d, err := mustBuilder(t, provider.Policy{}).NewConfigDeployment("id", "grp", params)
	require.NoError(t, err)

	err = credCall(t, d)
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 502, ue.Status, "an endpoint that is down is not a credentials problem: %v", err)
	require.True(t, ue.Retryable)
	require.Contains(t, ue.Message, "bedrock: get AWS credentials")
	require.Empty(t, br.Requests())
	down.Store(false)
	for range 3 {
		require.NoError(t, credCall(t, d))
	}
	require.Equal(t, int64(1), fetched.Load(), "the credentials are cached until near their expiry")
}

// A vertex_credentials file path reads a file of the gateway's host (the operator's
// credentials, as GOOGLE_APPLICATION_CREDENTIALS names one): a database object may name one
// only when allowed_env_secrets allows GOOGLE_APPLICATION_CREDENTIALS; a config object may;
// inline JSON is the writer's own and always may.
func TestVertexCredentialsFileIsAnImplicitCredential(t *testing.T) {
	vx := fakeupstream.StartVertex(t, "proj-file")
	path := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(path, []byte(vx.ServiceAccountJSON()), 0o600))
	b := mustBuilder(t, provider.Policy{}) // the default policy, with the vendors
	file, _ := json.Marshal(map[string]any{"model": "vertex_ai/gemini-2.5-pro", "api_base": vx.URL, "vertex_credentials": path})
	inline, _ := json.Marshal(map[string]any{"model": "vertex_ai/gemini-2.5-pro", "api_base": vx.URL, "vertex_credentials": vx.ServiceAccountJSON()})

	_, err := b.NewDeployment("id", "grp", file)
	require.EqualError(t, err, "litellm_params.vertex_credentials: environment variable GOOGLE_APPLICATION_CREDENTIALS is not allowed for database objects (a vertex_credentials file path reads the gateway's own files)")
	_, err = b.NewDeployment("id", "grp", inline)
	require.NoError(t, err)
	d, err := b.NewConfigDeployment("id", "grp", file)
	require.NoError(t, err)
	require.NoError(t, credCall(t, d))
	b = mustBuilder(t, provider.Policy{AllowedEnvSecrets: []string{"GOOGLE_APPLICATION_CREDENTIALS"}})
	_, err = b.NewDeployment("id", "grp", file)
	require.NoError(t, err)
}

// mustBuilder is provider.NewBuilder for a policy the test knows is valid, with the vendors
// (gemini, vertex, bedrock).
func mustBuilder(t *testing.T, p provider.Policy) *provider.Builder {
	t.Helper()
	b, err := provider.NewBuilder(p, gemini.Vendor, vertex.Vendor, bedrock.Vendor)
	require.NoError(t, err)
	return b
}
