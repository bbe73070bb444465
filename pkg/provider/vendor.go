package provider

import (
	"lockstep/pkg/format"

	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/tidwall/gjson"
)

// Vendors: an upstream API family beyond the built-in ones (OpenAI's API and its compatible
// providers, Anthropic's) is a Vendor, written in a sub-package of pkg/provider
// (pkg/provider/ollama) against the small API of this file, and registered explicitly by the
// process that builds deployments: provider.NewBuilder(policy, ollama.Vendor, …) in
// cmd/gateway. Nothing registers itself: a prefix no Vendor given to the Builder names is an
// unknown provider.

// Vendor describes one upstream API family served under one or more litellm_params.model
// prefixes (LiteLLM's provider names).
type Vendor struct {
	// Names are the litellm_params.model prefixes (and custom_llm_provider values) it serves,
	// e.g. "ollama", "ollama_chat".
	Names []string
	// APIBase is the default api_base; "" means api_base is required unless DerivedBase.
	APIBase string
	// KeyEnv and BaseEnv are the environment variables LiteLLM reads when api_key / api_base
	// are not given ("" for none). KeyEnv obeys the secrets policy for database objects.
	KeyEnv, BaseEnv string
	// DerivedBase: api_base may be omitted; Setup derives it (from a region, a project, …).
	DerivedBase bool
	// Setup finishes a deployment once the common litellm_params fields are read: it sets the
	// Wire (the upstream's own API, translated from every inbound format), its endpoints, the
	// embeddings API and the headers. Errors name the litellm_params field.
	Setup func(s *Setup) error
}

// providerSpec returns the deployment spec the Builder keeps for v.
func (v Vendor) providerSpec() providerSpec {
	setup := v.Setup
	return providerSpec{wire: wireNative, apiBase: v.APIBase, keyEnv: v.KeyEnv, baseEnv: v.BaseEnv, derivedBase: v.DerivedBase,
		setup: func(d *Deployment, p gjson.Result) error {
			s := &Setup{d: d, p: p}
			if setup != nil {
				if err := setup(s); err != nil {
					return err
				}
			}
			s.finish()
			return nil
		}}
}

// withVendors returns the built-in providers plus vendors. Errors: a name given twice.
// Each spec is allocated once and shared by the deployments of its providers.
func withVendors(vendors []Vendor) (map[string]*providerSpec, error) {
	out := make(map[string]*providerSpec, len(providers)+len(vendors))
	for name, spec := range providers {
		out[name] = &spec
	}
	for _, v := range vendors {
		spec := new(providerSpec)
		*spec = v.providerSpec()
		for _, name := range v.Names {
			if _, dup := out[name]; dup || name == "" {
				return nil, fmt.Errorf("provider %q registered twice", name)
			}
			out[name] = spec
		}
	}
	return out, nil
}

// Setup is what a [Vendor]'s Setup sees of the deployment being built.
type Setup struct {
	d      *Deployment
	p      gjson.Result
	header http.Header // nil until SetHeader
}

// Deployment is the deployment being built: its exported fields (Model, APIBase, APIKey,
// ExtraHeaders, …) are read; they are not to be changed.
func (s *Setup) Deployment() *Deployment { return s.d }

// Param reads an optional string member of litellm_params ("" when absent or null),
// resolving "os.environ/NAME" under the deployment's secrets policy. Errors name the field.
func (s *Setup) Param(field string) (string, error) { return s.d.paramStr(s.p, field) }

// ParamOrEnv is [Setup.Param] falling back to the environment variable env when the field
// is absent or empty (env "": none).
func (s *Setup) ParamOrEnv(field, env string) (string, error) { return s.d.paramOrEnv(s.p, field, env) }

// ImplicitChain checks that the deployment may use a credential chain the provider searches
// when litellm_params has no credential (the AWS default chain, Google Application Default
// Credentials): a database object only when the secrets policy allows env (its main
// variable); a config-file object always. Errors name field and env.
func (s *Setup) ImplicitChain(field, env string) error { return s.d.implicitChain(field, env) }

// AddSecrets adds credentials beyond api_key (a secret access key, a session token) that are
// redacted from error texts.
func (s *Setup) AddSecrets(secrets ...string) {
	s.d.extraSecrets = append(s.d.extraSecrets, secrets...)
}

// SetAPIBase replaces the deployment's APIBase (one derived from a region, a project, …).
func (s *Setup) SetAPIBase(base string) { s.d.APIBase = base }

// SetModel replaces the deployment's upstream Model name (a route hint prefix dropped).
func (s *Setup) SetModel(model string) { s.d.Model = model }

// SetSigner makes sg authenticate every upstream request once its body is final.
func (s *Setup) SetSigner(sg Signer) { s.d.signer = sg }

// SetWire makes w the deployment's upstream API, called at url (streamURL for streaming
// calls when the API has its own; "" for the same url).
func (s *Setup) SetWire(w Wire, url, streamURL string) {
	s.d.native = w
	s.d.urls[format.FormatNative] = url
	s.d.streamURL = streamURL
}

// SetAnthropicWire makes the deployment speak Anthropic's Messages API at url (streamURL for
// streams) as Claude on Vertex AI does: the body carries anthropic_version
// "vertex-2023-10-16" ([VertexAnthropicVersion]) and no "model" (the model is in the URL).
func (s *Setup) SetAnthropicWire(url, streamURL string) {
	s.d.wire, s.d.vertexAnthropic, s.d.native = wireAnthropic, true, nil
	s.d.urls[format.FormatMessages] = url
	s.d.streamURL = streamURL
}

// SetEmbedder gives the deployment the embeddings API e (/v1/embeddings is served through it).
// A nil e leaves the deployment without one.
func (s *Setup) SetEmbedder(e Embedder) {
	s.d.embedder = e // a nil interface when e is nil
}

// SetHeader sets a header of every upstream request; litellm_params.extra_headers still win.
func (s *Setup) SetHeader(key, value string) {
	if s.header == nil {
		s.header = s.d.header.Clone()
	}
	s.header.Set(key, value)
}

func (s *Setup) finish() {
	if s.header == nil {
		return
	}
	for k, v := range s.d.ExtraHeaders {
		s.header.Set(k, v)
	}
	s.d.header = s.header
}

// Wire is a vendor's upstream API: the neutral request rendered as its body, its answer and
// its stream read back. Every inbound format (chat, responses, messages) reaches it through
// the neutral [format.Request] and [format.Result], as for the built-in families.
type Wire interface {
	// Request renders r as the upstream's body (r.Stream() tells which endpoint it is for).
	// Errors are *format.RequestError (the request cannot be sent to this provider; see
	// [format.BadRequest]).
	Request(d *Deployment, r *format.Request) ([]byte, error)
	// Result parses a non-streaming answer.
	Result(raw []byte) (*format.Result, error)
	// Frames splits a streamed answer into frames (SSE, NDJSON lines, …; see
	// [NewSSEReader]).
	Frames(body io.Reader) FrameReader
	// Decoder translates the frames into calls of r; model names the answer when the
	// upstream does not.
	Decoder(r format.Renderer, model string) format.Decoder
}

// OutputFormatWire is a [Wire] that renders the request's structured output
// ([format.Request.OutputFormat]) in its own form; for a Wire without it the client's member
// (response_format, text.format, output_config.format) is dropped and named in
// [format.DroppedHeader].
type OutputFormatWire interface {
	Wire
	RendersOutputFormat()
}

// Signer authenticates one upstream request after its body is final (an AWS Signature
// Version 4, an OAuth2 bearer token). It may set headers on req (its Header is a private
// copy). Errors are *UpstreamError.
type Signer interface {
	Sign(ctx context.Context, req *http.Request, body []byte) error
}

// Lazy is a value found on first use (a credential chain): failures are never kept, the
// first success is kept for good; reads after it are one atomic load.
type Lazy[T any] = lazyValue[T]

// NewLazy returns the Lazy value find finds.
func NewLazy[T any](find func() (T, error)) *Lazy[T] { return &lazyValue[T]{find: find} }

// Get returns the value, finding it if no lookup succeeded yet.
func (l *lazyValue[T]) Get() (T, error) { return l.get() }

// FrameReader reads one frame of a streamed answer at a time (see [NewSSEReader]).
type FrameReader = frameReader

// NewSSEReader splits a body of server-sent events (the SSE framing of the HTML Living
// Standard): each frame's event name and joined data lines.
func NewSSEReader(r io.Reader) FrameReader { return newSSEReader(r) }

// ---- embeddings ----

// Embedder is a vendor's embeddings API: /v1/embeddings requests are read into an
// [EmbedRequest], sent as the calls Calls returns, and answered as an OpenAI embedding list.
type Embedder interface {
	// Calls turns the request into upstream calls, each covering the next N inputs in order.
	Calls(d *Deployment, r *EmbedRequest) ([]EmbedCall, error)
	// Parse reads one call's answer: one raw JSON array of numbers per input it covered (see
	// [VectorOf]), and the prompt tokens the provider reported (0 when none).
	Parse(raw []byte, h http.Header) (vectors []string, tokens int64, err error)
}

// EmbedRequest is an OpenAI embeddings request.
type EmbedRequest = embedRequest

// Inputs are the texts to embed.
func (r *embedRequest) Inputs() []string { return r.inputs }

// TaskType is task_type (Gemini) or input_type (Cohere), "" when absent.
func (r *embedRequest) TaskType() string { return r.taskType }

// Dimensions is the dimensions asked, 0 for the model's default.
func (r *embedRequest) Dimensions() int64 { return r.dimensions }

// EmbedCall is one upstream embeddings call: POST Body to URL, covering N inputs.
type EmbedCall struct {
	URL  string
	Body []byte
	N    int
}

// VectorOf returns the raw JSON array of numbers v, or an error naming what (e.g.
// "embeddings[]") is not one.
func VectorOf(v gjson.Result, what string) (string, error) { return vectorOf(v, what) }
