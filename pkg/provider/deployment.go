package provider

import (
	"lockstep/pkg/format"
	"lockstep/pkg/intern"

	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// DefaultTimeout is a deployment's timeout when litellm_params has none, as in LiteLLM
// (litellm.request_timeout = 600 s).
const DefaultTimeout = 600 * time.Second

// AnthropicVersion is the anthropic-version header sent to Anthropic upstreams
// (https://docs.anthropic.com/en/api/versioning).
const AnthropicVersion = "2023-06-01"

// wire is the API family an upstream speaks.
type wire uint8

const (
	wireOpenAI wire = iota + 1
	wireAnthropic
	// wireNative: the provider's own API (Gemini, Bedrock Converse, Ollama), always translated
	// through the deployment's Wire.
	wireNative
)

// providerSpec describes one litellm_params.model prefix.
type providerSpec struct {
	wire wire
	// apiBase is the default api_base; "" means api_base is required.
	apiBase string
	// keyEnv and baseEnv are the environment variables LiteLLM reads when api_key / api_base
	// are not given.
	keyEnv, baseEnv string
	// responses: the upstream serves POST /responses itself; otherwise /responses is
	// translated to chat completions (LiteLLM's responses→completion bridge).
	responses bool
	// maxCompletionTokens: send max_completion_tokens instead of max_tokens in translated chat
	// requests (OpenAI's reasoning models reject max_tokens).
	maxCompletionTokens bool
	// derivedBase: api_base may be omitted; setup derives it (from a region, a project, …).
	derivedBase bool
	// passthrough: the OpenAI routes beyond chat, responses and embeddings (completions, images,
	// moderations, audio) are served by passing the body through.
	passthrough bool
	// setup, when set, finishes the deployment after the common fields are read: it reads the
	// provider's own litellm_params and sets its endpoints, headers and request signer.
	setup func(d *Deployment, p gjson.Result) error
}

// providers are the built-in litellm_params.model prefixes, served by every [Builder] (the
// others are the [Vendor]s given to it). All but anthropic speak the OpenAI API; their default bases are the ones LiteLLM uses
// (litellm/llms/*/chat/transformation.py, get_llm_provider_logic.py).
var providers = map[string]providerSpec{
	"openai":        {wire: wireOpenAI, apiBase: "https://api.openai.com/v1", keyEnv: "OPENAI_API_KEY", baseEnv: "OPENAI_BASE_URL", responses: true, maxCompletionTokens: true, passthrough: true},
	"azure":         {wire: wireOpenAI, keyEnv: "AZURE_API_KEY", baseEnv: "AZURE_API_BASE", maxCompletionTokens: true, passthrough: true, setup: setupAzure},
	"anthropic":     {wire: wireAnthropic, apiBase: "https://api.anthropic.com", keyEnv: "ANTHROPIC_API_KEY", baseEnv: "ANTHROPIC_API_BASE"},
	"hosted_vllm":   {wire: wireOpenAI, keyEnv: "HOSTED_VLLM_API_KEY", baseEnv: "HOSTED_VLLM_API_BASE", responses: true, passthrough: true},
	"litellm_proxy": {wire: wireOpenAI, keyEnv: "LITELLM_PROXY_API_KEY", baseEnv: "LITELLM_PROXY_API_BASE", responses: true, passthrough: true},
	"custom_openai": {wire: wireOpenAI, passthrough: true},
	"lm_studio":     {wire: wireOpenAI, keyEnv: "LM_STUDIO_API_KEY", baseEnv: "LM_STUDIO_API_BASE", passthrough: true},
	"openrouter":    {wire: wireOpenAI, apiBase: "https://openrouter.ai/api/v1", keyEnv: "OPENROUTER_API_KEY", baseEnv: "OPENROUTER_API_BASE", passthrough: true},
	"groq":          {wire: wireOpenAI, apiBase: "https://api.groq.com/openai/v1", keyEnv: "GROQ_API_KEY", baseEnv: "GROQ_API_BASE", passthrough: true},
	"deepseek":      {wire: wireOpenAI, apiBase: "https://api.deepseek.com/v1", keyEnv: "DEEPSEEK_API_KEY", baseEnv: "DEEPSEEK_API_BASE", passthrough: true},
	"mistral":       {wire: wireOpenAI, apiBase: "https://api.mistral.ai/v1", keyEnv: "MISTRAL_API_KEY", baseEnv: "MISTRAL_API_BASE", passthrough: true},
	"xai":           {wire: wireOpenAI, apiBase: "https://api.x.ai/v1", keyEnv: "XAI_API_KEY", baseEnv: "XAI_API_BASE", passthrough: true},
	"together_ai":   {wire: wireOpenAI, apiBase: "https://api.together.xyz/v1", keyEnv: "TOGETHERAI_API_KEY", baseEnv: "TOGETHER_AI_API_BASE", passthrough: true},
	"fireworks_ai":  {wire: wireOpenAI, apiBase: "https://api.fireworks.ai/inference/v1", keyEnv: "FIREWORKS_AI_API_KEY", baseEnv: "FIREWORKS_AI_API_BASE", passthrough: true},
	"deepinfra":     {wire: wireOpenAI, apiBase: "https://api.deepinfra.com/v1/openai", keyEnv: "DEEPINFRA_API_KEY", baseEnv: "DEEPINFRA_API_BASE", passthrough: true},
	"perplexity":    {wire: wireOpenAI, apiBase: "https://api.perplexity.ai", keyEnv: "PERPLEXITYAI_API_KEY", baseEnv: "PERPLEXITY_API_BASE", passthrough: true},
}

// SupportedProviders lists the litellm_params.model prefixes the default builder accepts
// (the built-in ones and the vendors of this package), sorted (openai and anthropic first).
func SupportedProviders() []string { return defaultBuilder.SupportedProviders() }

// SupportedProviders lists the accepted litellm_params.model prefixes: the built-in ones and
// b's vendors, sorted (openai and anthropic first).
func (b *Builder) SupportedProviders() []string {
	providers := b.or().providers
	out := make([]string, 0, len(providers))
	for name := range providers {
		if name != "openai" && name != "anthropic" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return append([]string{"openai", "anthropic"}, out...)
}

// Deployment is one upstream target, built from a model row's litellm_params with LiteLLM's
// semantics (https://docs.litellm.ai/docs/proxy/configs#all-settings). It is immutable once
// built and safe for concurrent use.
type Deployment struct {
	// ModelID is the row's model_info.id; ModelName the model group name clients send.
	ModelID, ModelName string
	// Provider is the prefix of litellm_params.model ("openai", "anthropic", "hosted_vllm", …;
	// see [SupportedProviders]), or litellm_params.custom_llm_provider when set.
	Provider string
	// Model is the upstream model name: litellm_params.model after the "provider/" prefix.
	Model string
	// APIBase is the upstream base URL without a trailing slash. Defaults: openai
	// https://api.openai.com/v1, anthropic https://api.anthropic.com. As in LiteLLM, an OpenAI
	// base includes the version ("/v1") and routes are appended to it ("/chat/completions");
	// for Anthropic "/v1/messages" is appended (or "/messages" when the base ends in "/v1").
	APIBase string
	// APIKey is litellm_params.api_key, else the provider's environment variable
	// (OPENAI_API_KEY, ANTHROPIC_API_KEY, …) read when the deployment was built. May be empty
	// (self-hosted servers): then no auth header is sent.
	APIKey string
	// Organization is litellm_params.organization, sent as OpenAI-Organization.
	Organization string
	// ExtraHeaders is litellm_params.extra_headers, added to every upstream request.
	ExtraHeaders map[string]string
	// MockResponse is litellm_params.mock_response: when set, calls are answered locally with
	// this text and no upstream call is made. LiteLLM's error mocks are honoured: the values
	// "litellm.RateLimitError" (429), "litellm.InternalServerError" (500),
	// "litellm.ServiceUnavailableError" (503), "litellm.Timeout" (504),
	// "litellm.BadRequestError" and "litellm.ContextWindowExceededError" (400) fail the call
	// with an [format.UpstreamError] of that status.
	MockResponse *string
	// Timeout bounds a non-streaming call, from litellm_params.timeout in seconds (number or
	// numeric string). Default 600 s.
	Timeout time.Duration
	// StreamTimeout bounds a streaming call's wait for the response headers and for each next
	// frame (an idle timeout, like the read timeout of LiteLLM's HTTP client): from
	// litellm_params.stream_timeout in seconds, default Timeout.
	StreamTimeout time.Duration
	// APIVersion is litellm_params.api_version: azure's api-version query parameter (default
	// [DefaultAzureAPIVersion], or AZURE_API_VERSION).
	APIVersion string
	// MaxRetries is litellm_params.max_retries, or -1 when unset (the router's default applies).
	MaxRetries int
	// RPM and TPM are litellm_params.rpm / tpm (0 when unset), for routing.
	RPM, TPM int64

	spec *providerSpec // shared by every deployment of the provider (Builder.providers); never modified
	wire wire          // the API family spoken: spec.wire, or what setup chose (Claude on vertex_ai)
	// vertexAnthropic: Claude on Vertex AI: Messages bodies carry anthropic_version
	// "vertex-2023-10-16" and no "model" (the model is in the URL).
	vertexAnthropic bool
	// config: built from a config-file object (NewConfigDeployment), whose implicit
	// environment credentials are not subject to allowed_env_secrets (implicitEnv)
	config    bool
	urls      [format.NumFormats]string // upstream endpoint per format; "" = not served
	streamURL string                    // formatNative's streaming endpoint when it differs from urls[formatNative]
	// parsed caches urls (then streamURL, then messagesStream) parsed, filled on a deployment's first call
	// through each (endpoint): a replica holding 100,000 deployments calls few of them, and a
	// parsed URL costs more than the rest of the deployment (about 1.1 kB for its 8 endpoints);
	// the array itself is allocated on the first call (104 bytes a deployment never called
	// does not hold)
	parsed   atomic.Pointer[[format.NumFormats + 2]atomic.Pointer[url.URL]]
	native   Wire     // wireNative: the request/answer/stream translation
	embedder Embedder // wireNative: its embeddings API, nil when it has none
	signer   Signer   // nil: the static header is all the authentication
	// messages: the Anthropic-native Messages endpoint of a wireNative deployment (Claude on
	// Bedrock InvokeModel) at urls[FormatMessages] and messagesStream; nil: none
	messages       MessagesWire
	messagesStream string
	// header is the upstream request headers while the deployment is built (setup edits it);
	// nil once built: hdr holds them as canonical key, value pairs (~100 bytes instead of a
	// ~400-byte map) and headers makes the map on the deployment's first call
	header       http.Header
	hdr          []string
	hdrMap       atomic.Pointer[http.Header]
	secrets      []string // redacted from error texts (collectSecrets)
	extraSecrets []string // provider credentials beyond APIKey (azure_ad_token, AWS secret, …)
	// builder: the policy the deployment was built under (resolveEnv, implicitEnv, Derive)
	builder *Builder
}

// NewDeployment validates litellm_params (a JSON object) and builds the deployment for model
// row modelID of group modelName. Errors name the field, e.g.
//
//	litellm_params.model is required
//	litellm_params.model: unknown provider "foo" in "foo/bar" (supported: openai, anthropic, …)
//	litellm_params.api_base: "ftp://x" is not an http(s) URL
//
// String values of the form "os.environ/NAME" are read from the environment, as LiteLLM does,
// for the names the secrets policy allows (resolveEnv, API.md "Security rules"): litellm_params
// given here come from the database or the API (the config loader resolves the config file's
// references itself, for any name). A credential the provider would take implicitly from the
// environment when litellm_params has none (OPENAI_API_KEY, AZURE_AD_TOKEN, the AWS default
// chain, Google Application Default Credentials; see implicitEnv) obeys the same policy:
//
//	litellm_params.api_key: environment variable OPENAI_API_KEY is not allowed for database objects
//
// Values sealed with the salt key (Builder.SealParams) are decrypted; one that cannot be is an error
// naming the field ([ErrSealedNoKey], [ErrSealedWrongKey]).
//
// The policy is b's ([Policy]; a nil b is the default policy's).
func (b *Builder) NewDeployment(modelID, modelName string, litellmParams []byte) (*Deployment, error) {
	return b.or().newDeployment(modelID, modelName, litellmParams, false)
}

// NewDeployment is [Builder.NewDeployment] under the default [Policy] (DefaultAllowedEnvSecrets,
// no salt key): for tests and tools; the gateway builds through its configured Builder.
func NewDeployment(modelID, modelName string, litellmParams []byte) (*Deployment, error) {
	return defaultBuilder.newDeployment(modelID, modelName, litellmParams, false)
}

// NewConfigDeployment is [Builder.NewDeployment] for an object of the config file: the
// provider's implicit environment credentials are read whatever allowed_env_secrets says, as
// LiteLLM reads them (API.md "Security rules": config-file objects may name any variable).
func (b *Builder) NewConfigDeployment(modelID, modelName string, litellmParams []byte) (*Deployment, error) {
	return b.or().newDeployment(modelID, modelName, litellmParams, true)
}

// NewConfigDeployment is [Builder.NewConfigDeployment] under the default [Policy] (tests, tools).
func NewConfigDeployment(modelID, modelName string, litellmParams []byte) (*Deployment, error) {
	return defaultBuilder.newDeployment(modelID, modelName, litellmParams, true)
}

// Derive builds a deployment like d (same policy, same config-file or database origin) from
// other litellm_params, for model group modelName: a wildcard group's deployment for the
// model a client asked (router). Errors as for [Builder.NewDeployment].
func (d *Deployment) Derive(modelName string, litellmParams []byte) (*Deployment, error) {
	return d.builder.or().newDeployment(d.ModelID, modelName, litellmParams, d.config)
}

func (b *Builder) newDeployment(modelID, modelName string, litellmParams []byte, fromConfig bool) (*Deployment, error) {
	if !format.ValidJSON(litellmParams) {
		return nil, errors.New("litellm_params: invalid JSON")
	}
	p := gjson.ParseBytes(litellmParams)
	if !p.IsObject() {
		return nil, errors.New("litellm_params: must be a JSON object")
	}
	d := &Deployment{ModelID: modelID, ModelName: modelName, MaxRetries: -1, config: fromConfig, builder: b}

	str := func(field string) (string, error) { return d.paramStr(p, field) }

	model, err := str("model")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(model) == "" {
		return nil, errors.New("litellm_params.model is required")
	}
	custom, err := str("custom_llm_provider")
	if err != nil {
		return nil, err
	}
	if err := d.setProvider(model, custom); err != nil {
		return nil, err
	}

	if d.APIKey, err = str("api_key"); err != nil {
		return nil, err
	}
	if d.APIKey == "" && d.spec.keyEnv != "" && p.Get("mock_response").Type != gjson.String {
		if d.APIKey, err = d.implicitEnv("api_key", d.spec.keyEnv); err != nil {
			return nil, err
		}
	}
	base, err := str("api_base")
	if err != nil {
		return nil, err
	}
	if base == "" && d.spec.baseEnv != "" {
		base = os.Getenv(d.spec.baseEnv)
	}
	if base == "" {
		base = d.spec.apiBase
	}
	if base == "" && p.Get("mock_response").Type != gjson.String && !d.spec.derivedBase {
		return nil, fmt.Errorf("litellm_params.api_base is required for provider %q", d.Provider)
	}
	if base != "" {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("litellm_params.api_base: %q is not an http(s) URL", base)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("litellm_params.api_base: %q must not have a query or fragment", base)
		}
		d.APIBase = strings.TrimRight(base, "/")
	}
	if d.Organization, err = str("organization"); err != nil {
		return nil, err
	}

	switch mr := p.Get("mock_response"); mr.Type {
	case gjson.Null:
	case gjson.String:
		s := mr.Str
		d.MockResponse = &s
	default:
		return nil, fmt.Errorf("litellm_params.mock_response: must be a string, got %s", mr.Raw)
	}

	if d.Timeout, err = d.seconds(p, "timeout", DefaultTimeout); err != nil {
		return nil, err
	}
	if d.StreamTimeout, err = d.seconds(p, "stream_timeout", d.Timeout); err != nil {
		return nil, err
	}
	if v := p.Get("max_retries"); v.Exists() && v.Type != gjson.Null {
		n, err := nonNegativeInt(v, "max_retries")
		if err != nil {
			return nil, err
		}
		d.MaxRetries = int(n)
	}
	if d.RPM, err = optInt(p, "rpm"); err != nil {
		return nil, err
	}
	if d.TPM, err = optInt(p, "tpm"); err != nil {
		return nil, err
	}

	if eh := p.Get("extra_headers"); eh.Exists() && eh.Type != gjson.Null {
		if !eh.IsObject() {
			return nil, errors.New("litellm_params.extra_headers: must be an object of strings")
		}
		d.ExtraHeaders = map[string]string{}
		var herr error
		eh.ForEach(func(k, v gjson.Result) bool {
			if v.Type != gjson.String {
				herr = fmt.Errorf("litellm_params.extra_headers.%s: must be a string", k.Str)
				return false
			}
			val, err := d.builder.resolveEnv("extra_headers."+k.Str, v.Str)
			if err != nil {
				herr = err
				return false
			}
			d.ExtraHeaders[k.Str] = val
			return true
		})
		if herr != nil {
			return nil, herr
		}
	}
	d.buildEndpoints()
	if d.spec.setup != nil {
		if err := d.spec.setup(d, p); err != nil {
			return nil, err
		}
	}
	d.intern() // first: the secrets then share the interned and cloned strings, not the litellm_params text
	d.collectSecrets()
	d.freezeHeader()
	return d, nil
}

// intern replaces the deployment's strings that many deployments repeat (the upstream model,
// provider, group name, base and endpoints: 100,000 deployments of one provider hold each
// once) with their canonical copies (intern.String: unique.Make behind a cache), which also lets the litellm_params text the
// parsed values were cut from be collected.
func (d *Deployment) intern() {
	in := func(s *string) {
		if *s != "" {
			*s = intern.String(*s)
		}
	}
	in(&d.ModelName)
	in(&d.Provider)
	in(&d.Model)
	in(&d.APIBase)
	in(&d.APIVersion)
	in(&d.streamURL)
	for i := range d.urls {
		in(&d.urls[i])
	}
	in(&d.messagesStream)
	d.APIKey = strings.Clone(d.APIKey)
	d.Organization = strings.Clone(d.Organization)
}

// unparsable marks a cached endpoint that does not parse: it is left to http.NewRequest at
// call time, which reports it as before.
var unparsable = &url.URL{}

func parseEndpoint(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil
	}
	// as http.NewRequest does: a trailing ":" without a port is dropped from the host
	if i := strings.LastIndexByte(u.Host, ':'); i == len(u.Host)-1 && !strings.Contains(u.Host[i:], "]") {
		u.Host = u.Host[:i]
	}
	return u
}

// endpoint is url(up, stream) parsed, nil when it was not (send then builds the request
// with http.NewRequest). Shared by every request and never modified: net/http only reads
// a request's URL (a redirect follows a clone of it).
// The first call parses and caches it (concurrent first calls parse the same string to
// equal values; either is kept): later calls are one atomic load.
func (d *Deployment) endpoint(up format.Format, stream bool) *url.URL {
	i, s := int(up), d.urls[up]
	switch {
	case stream && up == format.FormatMessages && d.messagesStream != "":
		i, s = int(format.NumFormats)+1, d.messagesStream
	case stream && d.streamURL != "":
		i, s = int(format.NumFormats), d.streamURL
	}
	cache := d.parsed.Load()
	if cache == nil {
		d.parsed.CompareAndSwap(nil, new([format.NumFormats + 2]atomic.Pointer[url.URL]))
		cache = d.parsed.Load()
	}
	if u := cache[i].Load(); u != nil {
		if u == unparsable {
			return nil
		}
		return u
	}
	if s == "" {
		return nil
	}
	u := parseEndpoint(s)
	if u == nil {
		cache[i].Store(unparsable)
		return nil
	}
	cache[i].Store(u)
	return u
}

// paramStr reads an optional string member of litellm_params ("" when absent or null),
// resolving "os.environ/NAME". Errors name the field.
func (d *Deployment) paramStr(p gjson.Result, field string) (string, error) {
	v := p.Get(gjson.Escape(field))
	switch v.Type {
	case gjson.Null:
		return "", nil
	case gjson.String:
		return d.builder.resolveEnv(field, v.Str)
	}
	return "", fmt.Errorf("litellm_params.%s: must be a string, got %s", field, v.Raw)
}

// implicitEnv reads environment variable env, the provider's implicit source of credential
// field when litellm_params has none (LiteLLM's get_secret fallbacks: OPENAI_API_KEY,
// AZURE_AD_TOKEN, …). For a database object (not d.config) a set, non-empty variable the
// secrets policy does not allow (EnvSecretAllowed) is an error naming the field and the
// variable, the text an explicit "os.environ/NAME" gets (API.md "Security rules"); an unset
// one reads as "" (no credential is taken, nothing to refuse).
func (d *Deployment) implicitEnv(field, env string) (string, error) {
	v := os.Getenv(env)
	if v == "" || d.config || d.builder.EnvSecretAllowed(env) {
		return v, nil
	}
	return "", envNotAllowed(field, env)
}

// implicitChain checks that a database object may use a credential chain the provider
// searches when litellm_params has no credential (the AWS default chain, Google Application
// Default Credentials): environment variables, files and instance metadata the gateway's
// operator set up for the config file, not for whoever writes rows. It may when the secrets
// policy allows env, the chain's main variable (AWS_SECRET_ACCESS_KEY,
// GOOGLE_APPLICATION_CREDENTIALS), whether set or not: the chain reaches beyond the
// environment. Config-file objects always may.
func (d *Deployment) implicitChain(field, env string) error {
	if d.config || d.builder.EnvSecretAllowed(env) {
		return nil
	}
	return envNotAllowed(field, env)
}

// paramOrEnv is paramStr falling back to the environment variable env when the field is
// absent or empty.
func (d *Deployment) paramOrEnv(p gjson.Result, field, env string) (string, error) {
	v, err := d.paramStr(p, field)
	if v == "" && err == nil && env != "" {
		v = os.Getenv(env)
	}
	return v, err
}

// setProvider splits "provider/model" (LiteLLM's get_llm_provider). A custom_llm_provider
// wins over the prefix. A bare model name is accepted for the families LiteLLM infers
// without a prefix: claude-* (anthropic); OpenAI's text-completion models
// (gpt-3.5-turbo-instruct*, babbage-002, davinci-002: text-completion-openai when that vendor
// is registered, litellm.open_ai_text_completion_models); and OpenAI's own models (gpt-*,
// o1*, o3*, o4*, chatgpt-*, text-embedding-*, the image models dall-e-* and gpt-image-*, the
// audio models whisper-* and tts-*, the moderation models text-moderation-* and
// omni-moderation-*: openai, litellm.open_ai_chat_completion_models,
// openai_image_generation_models, open_ai_embedding_models, …).
// textCompletionOpenAI is LiteLLM's provider of OpenAI's completions API (the vendor
// pkg/provider/textcompletion).
const textCompletionOpenAI = "text-completion-openai"

func (d *Deployment) setProvider(model, custom string) error {
	if custom != "" {
		spec, ok := d.builder.providers[custom]
		if !ok {
			return fmt.Errorf("litellm_params.custom_llm_provider: unknown provider %q (supported: %s)", custom, strings.Join(d.builder.SupportedProviders(), ", "))
		}
		d.Provider, d.spec, d.wire = custom, spec, spec.wire
		d.Model = strings.TrimPrefix(model, custom+"/")
		return nil
	}
	prefix, rest, ok := strings.Cut(model, "/")
	if !ok {
		switch {
		case strings.HasPrefix(model, "claude"):
			prefix, rest = "anthropic", model
		case strings.HasPrefix(model, "gpt-3.5-turbo-instruct") || model == "babbage-002" || model == "davinci-002":
			prefix, rest = "openai", model
			if _, ok := d.builder.providers[textCompletionOpenAI]; ok {
				prefix = textCompletionOpenAI
			}
		case strings.HasPrefix(model, "dall-e-"), strings.HasPrefix(model, "gpt-image-"), strings.HasPrefix(model, "whisper-"),
			strings.HasPrefix(model, "tts-"), strings.HasPrefix(model, "text-moderation-"), strings.HasPrefix(model, "omni-moderation-"):
			prefix, rest = "openai", model
		case strings.HasPrefix(model, "gpt-"), strings.HasPrefix(model, "o1"), strings.HasPrefix(model, "o3"),
			strings.HasPrefix(model, "o4"), strings.HasPrefix(model, "chatgpt-"), strings.HasPrefix(model, "text-embedding-"):
			prefix, rest = "openai", model
		default:
			return fmt.Errorf("litellm_params.model: %q has no provider prefix (want provider/model, e.g. openai/gpt-4o-mini; supported: %s)", model, strings.Join(d.builder.SupportedProviders(), ", "))
		}
	}
	spec, known := d.builder.providers[prefix]
	if !known {
		return fmt.Errorf("litellm_params.model: unknown provider %q in %q (supported: %s)", prefix, model, strings.Join(d.builder.SupportedProviders(), ", "))
	}
	if rest == "" {
		return fmt.Errorf("litellm_params.model: %q has no model name after the provider prefix", model)
	}
	d.Provider, d.Model, d.spec, d.wire = prefix, rest, spec, spec.wire
	return nil
}

func (d *Deployment) buildEndpoints() {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "lockstep")
	switch d.wire {
	case wireNative:
		// setup sets the endpoints and authentication.
	case wireAnthropic:
		switch {
		case strings.HasSuffix(d.APIBase, "/v1/messages"):
			d.urls[format.FormatMessages] = d.APIBase
		case strings.HasSuffix(d.APIBase, "/v1"):
			d.urls[format.FormatMessages] = d.APIBase + "/messages"
		default:
			d.urls[format.FormatMessages] = d.APIBase + "/v1/messages"
		}
		if d.APIKey != "" {
			h.Set("x-api-key", d.APIKey)
		}
		h.Set("anthropic-version", AnthropicVersion)
	default:
		for _, f := range []format.Format{format.FormatChat, format.FormatResponses, format.FormatEmbeddings} {
			d.urls[f] = d.APIBase + f.Path()
		}
		if d.spec.passthrough {
			for _, f := range format.Formats {
				if f.Passthrough() {
					d.urls[f] = d.APIBase + f.Path()
				}
			}
		}
		if d.APIKey != "" {
			h.Set("Authorization", "Bearer "+d.APIKey)
		}
		if d.Organization != "" {
			h.Set("OpenAI-Organization", d.Organization)
		}
	}
	for k, v := range d.ExtraHeaders {
		h.Set(k, v)
	}
	d.header = h
}

// freezeHeader moves the built header into hdr (key, value pairs) and drops the map.
func (d *Deployment) freezeHeader() {
	n := 0
	for _, vs := range d.header {
		n += 2 * len(vs)
	}
	d.hdr = make([]string, 0, n)
	for k, vs := range d.header {
		for _, v := range vs {
			d.hdr = append(d.hdr, k, v)
		}
	}
	d.header = nil
}

// headers returns the upstream request headers, shared by every request and never modified
// (net/http only reads a request's headers; a caller that adds one clones them first): made
// from hdr on the deployment's first call (concurrent first calls make equal maps; one is
// kept), then one atomic load.
func (d *Deployment) headers() http.Header {
	if h := d.hdrMap.Load(); h != nil {
		return *h
	}
	h := make(http.Header, len(d.hdr)/2)
	for i := 0; i+1 < len(d.hdr); i += 2 {
		h[d.hdr[i]] = append(h[d.hdr[i]], d.hdr[i+1])
	}
	d.hdrMap.CompareAndSwap(nil, &h)
	return *d.hdrMap.Load()
}

// IsMock reports whether the deployment answers locally (litellm_params.mock_response).
func (d *Deployment) IsMock() bool { return d.MockResponse != nil }

// Supports reports whether the deployment can serve inbound format f (natively or
// translated): chat, responses and messages everywhere; embeddings and the passthrough formats
// (completions, images, moderations, audio) where the upstream has the endpoint. A mock
// deployment serves chat, responses, messages, embeddings and completions.
func (d *Deployment) Supports(f format.Format) bool {
	if d.MockResponse != nil {
		return f <= format.FormatCompletions
	}
	switch f {
	case format.FormatChat, format.FormatResponses, format.FormatMessages:
		return true
	case format.FormatEmbeddings:
		return d.urls[format.FormatEmbeddings] != "" || d.embedder != nil
	}
	return d.urls[f] != ""
}

// seconds reads a timeout in seconds: a number or numeric string, > 0.
func (d *Deployment) seconds(p gjson.Result, field string, def time.Duration) (time.Duration, error) {
	v := p.Get(field)
	var f float64
	switch v.Type {
	case gjson.Null:
		return def, nil
	case gjson.Number:
		f = v.Num
	case gjson.String:
		s, err := d.builder.resolveEnv(field, v.Str)
		if err != nil {
			return 0, err
		}
		if f, err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
			return 0, fmt.Errorf("litellm_params.%s: %q is not a number of seconds", field, v.Str)
		}
	default:
		return 0, fmt.Errorf("litellm_params.%s: must be a number of seconds, got %s", field, v.Raw)
	}
	if !(f > 0 && f <= 1e6) { // written so that NaN fails too (issue 17)
		return 0, fmt.Errorf("litellm_params.%s: %v seconds is out of range (0, 1000000]", field, f)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func nonNegativeInt(v gjson.Result, field string) (int64, error) {
	var n int64
	switch v.Type {
	case gjson.Number:
		if v.Num != float64(int64(v.Num)) {
			return 0, fmt.Errorf("litellm_params.%s: must be an integer, got %s", field, v.Raw)
		}
		n = int64(v.Num)
	case gjson.String:
		var err error
		if n, err = strconv.ParseInt(v.Str, 10, 64); err != nil {
			return 0, fmt.Errorf("litellm_params.%s: must be an integer, got %s", field, v.Raw)
		}
	default:
		return 0, fmt.Errorf("litellm_params.%s: must be an integer, got %s", field, v.Raw)
	}
	if n < 0 {
		return 0, fmt.Errorf("litellm_params.%s: must not be negative", field)
	}
	return n, nil
}

func optInt(p gjson.Result, field string) (int64, error) {
	v := p.Get(field)
	if v.Type == gjson.Null {
		return 0, nil
	}
	return nonNegativeInt(v, field)
}
