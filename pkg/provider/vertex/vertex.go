// Package vertex is the provider.Vendor of Vertex AI (LiteLLM's vertex_ai provider): Gemini
// models through the gemini Wire, Claude models through Anthropic's Messages API, Google
// OAuth2 tokens; registered by cmd/gateway: provider.NewBuilder(policy, vertex.Vendor, …).
package vertex

import (
	"context"
	"errors"
	"fmt"
	"lockstep/pkg/format"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"lockstep/pkg/provider"
	"lockstep/pkg/provider/gemini"
)

// Vendor serves the vertex_ai/<model> prefix.
var Vendor = provider.Vendor{Names: []string{"vertex_ai"}, DerivedBase: true, Setup: setupVertex}

// vertexScope is the OAuth2 scope Vertex AI accepts.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// setupVertex finishes a vertex_ai/<model> deployment (LiteLLM's vertex_ai provider):
//
//   - vertex_project (env VERTEXAI_PROJECT, else the credentials' project_id) and vertex_location
//     (env VERTEXAI_LOCATION, default us-central1) name the endpoint
//     https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/publishers/…
//     (https://aiplatform.googleapis.com for location "global"); api_base replaces the host part.
//   - Gemini models use generateContent / streamGenerateContent?alt=sse (publishers/google);
//     Claude models (claude-*) the Anthropic Messages body on rawPredict / streamRawPredict
//     (publishers/anthropic), with anthropic_version "vertex-2023-10-16" in the body.
//   - Credentials: vertex_credentials, a service-account (or authorized-user) JSON given
//     inline or as a file path, else Application Default Credentials
//     (GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server), looked up on first use;
//     a database object may use ADC, or a vertex_credentials file path, only when
//     allowed_env_secrets allows GOOGLE_APPLICATION_CREDENTIALS (implicitChain).
//     Tokens come from golang.org/x/oauth2/google (the token_uri of the JSON), cached until
//     shortly before they expire, and are sent as "Authorization: Bearer".
func setupVertex(s *provider.Setup) error {
	d := s.Deployment()
	project, err := s.ParamOrEnv("vertex_project", "VERTEXAI_PROJECT")
	if err != nil {
		return err
	}
	location, err := s.ParamOrEnv("vertex_location", "VERTEXAI_LOCATION")
	if err != nil {
		return err
	}
	if location == "" {
		location = "us-central1"
	}
	credsParam, err := s.Param("vertex_credentials")
	if err != nil {
		return err
	}
	vs := &vertexSigner{}
	if credsParam != "" {
		js := []byte(credsParam)
		if !strings.HasPrefix(strings.TrimSpace(credsParam), "{") {
			// a file of the gateway's host, as GOOGLE_APPLICATION_CREDENTIALS names one: the
			// operator's credentials, not the database writer's
			if err := s.ImplicitChain("vertex_credentials", "GOOGLE_APPLICATION_CREDENTIALS"); err != nil {
				return fmt.Errorf("%w (a vertex_credentials file path reads the gateway's own files)", err)
			}
			if js, err = os.ReadFile(credsParam); err != nil {
				return fmt.Errorf("litellm_params.vertex_credentials: %w", err)
			}
		}
		typ := google.CredentialsType(gjson.GetBytes(js, "type").Str)
		if typ != google.ServiceAccount && typ != google.AuthorizedUser {
			return fmt.Errorf("litellm_params.vertex_credentials: type %q is not supported (want %q or %q)", typ, google.ServiceAccount, google.AuthorizedUser)
		}
		creds, err := google.CredentialsFromJSONWithType(tokenContext, js, typ, vertexScope)
		if err != nil {
			return fmt.Errorf("litellm_params.vertex_credentials: %w", err)
		}
		vs.ts = creds.TokenSource
		if project == "" {
			project = creds.ProjectID
		}
	} else if d.MockResponse == nil {
		if err := s.ImplicitChain("vertex_credentials", "GOOGLE_APPLICATION_CREDENTIALS"); err != nil {
			return fmt.Errorf("%w (without vertex_credentials Application Default Credentials would be used)", err)
		}
		vs.adc = provider.NewLazy(func() (oauth2.TokenSource, error) {
			creds, err := google.FindDefaultCredentials(tokenContext, vertexScope)
			if err != nil {
				return nil, err
			}
			return creds.TokenSource, nil
		})
	}
	if project == "" && d.MockResponse == nil {
		return errors.New("litellm_params.vertex_project (or VERTEXAI_PROJECT, or project_id in vertex_credentials) is required for provider \"vertex_ai\"")
	}
	base := d.APIBase
	if base == "" {
		base = "https://" + location + "-aiplatform.googleapis.com"
		if location == "global" {
			base = "https://aiplatform.googleapis.com"
		}
		s.SetAPIBase(base)
	}
	publisher := "google"
	if strings.HasPrefix(d.Model, "claude") {
		publisher = "anthropic"
	}
	prefix := strings.TrimSuffix(base, "/v1") + "/v1/projects/" + url.PathEscape(project) + "/locations/" + url.PathEscape(location) +
		"/publishers/" + publisher + "/models/" + url.PathEscape(d.Model)
	// the header is the common one (Content-Type, User-Agent, extra_headers): no key header
	if publisher == "anthropic" {
		s.SetAnthropicWire(prefix+":rawPredict", prefix+":streamRawPredict")
	} else {
		s.SetWire(gemini.API{}, prefix+":generateContent", prefix+":streamGenerateContent?alt=sse")
		s.SetEmbedder(newVertexEmbed(prefix, d.Model))
	}
	s.SetSigner(vs)
	return nil
}

// tokenContext is the context token sources keep: its HTTP client bounds each token request.
var tokenContext = context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: 30 * time.Second})

// vertexSigner puts a Google OAuth2 access token on each request. Only successes are cached:
// the token source keeps a token until 10 s before it expires (oauth2.ReuseTokenSource) and
// fetches again after a failed fetch; Application Default Credentials are looked up again
// after a failed lookup (provider.Lazy).
type vertexSigner struct {
	ts  oauth2.TokenSource                 // vertex_credentials; nil with ADC
	adc *provider.Lazy[oauth2.TokenSource] // Application Default Credentials, found on first use
}

func (v *vertexSigner) Sign(_ context.Context, req *http.Request, _ []byte) error {
	ts := v.ts
	if v.adc != nil {
		var err error
		if ts, err = v.adc.Get(); err != nil {
			return &format.UpstreamError{Status: 401, Type: "authentication_error", Message: "vertex_ai: no credentials: set litellm_params.vertex_credentials or Application Default Credentials: " + err.Error()}
		}
	}
	tok, err := ts.Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return &format.UpstreamError{Status: 401, Type: "authentication_error", Message: "vertex_ai: access token refused: " + err.Error()}
		}
		return &format.UpstreamError{Status: 502, Message: "vertex_ai: get access token: " + err.Error(), Retryable: true}
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}

// ---- Vertex AI (https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/text-embeddings-api) ----

// vertexEmbed is Vertex AI's text embeddings API: POST {prefix}:predict {"instances":
// [{"content", "task_type"?}], "parameters": {"outputDimensionality"?}} answering
// {"predictions": [{"embeddings": {"values", "statistics": {"token_count"}}}]}; usage is the
// sum of token_count. gemini-embedding-* models take one instance per request, the others up
// to 250.
type vertexEmbed struct {
	url   string
	batch int
}

func newVertexEmbed(prefix, model string) vertexEmbed {
	if strings.Contains(model, "gemini-embedding") {
		return vertexEmbed{url: prefix + ":predict", batch: 1}
	}
	return vertexEmbed{url: prefix + ":predict", batch: 250}
}

func (v vertexEmbed) Calls(_ *provider.Deployment, r *provider.EmbedRequest) ([]provider.EmbedCall, error) {
	var calls []provider.EmbedCall
	for start := 0; start < len(r.Inputs()); start += v.batch {
		batch := r.Inputs()[start:min(start+v.batch, len(r.Inputs()))]
		b := []byte(`{"instances":[`)
		for i, t := range batch {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"content":`...)
			b = format.AppendJSONString(b, t)
			if r.TaskType() != "" {
				b = append(b, `,"task_type":`...)
				b = format.AppendJSONString(b, r.TaskType())
			}
			b = append(b, '}')
		}
		b = append(b, ']')
		if r.Dimensions() > 0 {
			b = append(b, `,"parameters":{"outputDimensionality":`...)
			b = strconv.AppendInt(b, r.Dimensions(), 10)
			b = append(b, '}')
		}
		calls = append(calls, provider.EmbedCall{URL: v.url, Body: append(b, '}'), N: len(batch)})
	}
	return calls, nil
}

func (vertexEmbed) Parse(raw []byte, _ http.Header) ([]string, int64, error) {
	var out []string
	var tokens int64
	var err error
	gjson.ParseBytes(raw).Get("predictions").ForEach(func(_, p gjson.Result) bool {
		var v string
		v, err = provider.VectorOf(p.Get("embeddings.values"), "predictions[].embeddings.values")
		out = append(out, v)
		tokens += p.Get("embeddings.statistics.token_count").Int()
		return err == nil
	})
	return out, tokens, err
}
