package itest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 19 item 13: LiteLLM's own example config loads on both replicas and serves:
// routing_strategy usage-based-routing-v2; os.environ/LANGFUSE_* in litellm_settings and
// os.environ/REDIS_* in router_settings (sections lockstep does not read) are not resolved
// though unset, and those keys are logged once, named; text-completion-openai/ (OpenAI
// /completions), sagemaker/ (InvokeEndpoint, SigV4), a bare dall-e-3 (provider openai
// inferred) and a region-less bedrock/* (region resolved at call time) load.
func TestLiteLLMExampleConfigLoads(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	aws := fakeupstream.Bedrock{Region: "us-east-1", AccessKeyID: "AKIDSAGEMAKER", SecretAccessKey: "sm-secret-0001"}
	sm := fakeupstream.StartSageMaker(t, aws)
	cfg := fmt.Sprintf(`model_list:
  - model_name: gpt-3.5-turbo-instruct
    litellm_params:
      model: text-completion-openai/gpt-3.5-turbo-instruct
      api_base: %[1]s/v1
      api_key: sk-up
  - model_name: sagemaker-completion-model
    litellm_params:
      model: sagemaker/berri-benchmarking-Llama-2-70b-chat-hf-4
      api_base: %[2]s
      aws_region_name: us-east-1
      aws_access_key_id: AKIDSAGEMAKER
      aws_secret_access_key: sm-secret-0001
  - model_name: dall-e-3
    litellm_params:
      model: dall-e-3
      api_base: %[1]s/v1
      api_key: sk-up
  - model_name: "bedrock/*"
    litellm_params:
      model: "bedrock/*"
litellm_settings:
  drop_params: True
  success_callback: ["langfuse"]
  langfuse_public_key: os.environ/LANGFUSE_PUBLIC_KEY
  langfuse_secret_key: os.environ/LANGFUSE_SECRET_KEY
router_settings:
  routing_strategy: usage-based-routing-v2
  redis_host: os.environ/REDIS_HOST
  redis_password: os.environ/REDIS_PASSWORD
  enable_pre_call_checks: true
`, up.URL, sm.URL)
	env := []string{"LANGFUSE_PUBLIC_KEY=", "LANGFUSE_SECRET_KEY=", "REDIS_HOST=", "REDIS_PASSWORD=", "AWS_REGION=", "AWS_DEFAULT_REGION="}
	p := StartPair(t, GatewayOpts{Config: cfg, Env: env})
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, "the unread keys are logged", func() bool { return strings.Contains(g.Log(), "LiteLLM settings lockstep does not implement") })
		log := g.Log()
		require.Equal(t, 1, strings.Count(log, "LiteLLM settings lockstep does not implement"), log)
		for _, k := range []string{"litellm_settings.drop_params", "litellm_settings.langfuse_public_key", "litellm_settings.langfuse_secret_key",
			"router_settings.redis_host", "router_settings.redis_password", "router_settings.enable_pre_call_checks"} {
			require.Contains(t, log, `"`+k+`"`)
		}
		require.NotContains(t, log, "LANGFUSE_PUBLIC_KEY is not set")
	}

	// text-completion-openai: a chat call becomes a prompt on /v1/completions
	st, _, b := fbChat(t, p.B, MasterKey, map[string]any{"model": "gpt-3.5-turbo-instruct"}, nil)
	require.Equal(t, 200, st, "%s", b)
	require.NotEmpty(t, gjson.GetBytes(b, "choices.0.message.content").Str, "%s", b)
	req, ok := up.LastRequest("/v1/completions")
	require.True(t, ok)
	require.Equal(t, "gpt-3.5-turbo-instruct", gjson.GetBytes(req.Body, "model").Str)
	require.Equal(t, "hi", gjson.GetBytes(req.Body, "prompt").Str)

	// sagemaker: InvokeEndpoint, signed (the fake verifies the signature)
	st, _, b = fbChat(t, p.B, MasterKey, map[string]any{"model": "sagemaker-completion-model"}, nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "sagemaker berri-benchmarking-Llama-2-70b-chat-hf-4: hi", gjson.GetBytes(b, "choices.0.message.content").Str, "%s", b)

	// dall-e-3 with no prefix is openai's image model
	st, _, b = postAs(t, p.B, MasterKey, "/v1/images/generations", map[string]any{"model": "dall-e-3", "prompt": "a lighthouse"}, nil)
	require.Equal(t, 200, st, "%s", b)
	req, ok = up.LastRequest("/v1/images/generations")
	require.True(t, ok)
	require.Equal(t, "dall-e-3", gjson.GetBytes(req.Body, "model").Str)

	// bedrock/* loaded without a region
	st, b = p.B.Do(t, "GET", "/model/info", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Contains(t, string(b), `"model_name":"bedrock/*"`)
}
