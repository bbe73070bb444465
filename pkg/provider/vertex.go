package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

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
func setupVertex(d *Deployment, p gjson.Result) error {
	project, err := d.paramOrEnv(p, "vertex_project", "VERTEXAI_PROJECT")
	if err != nil {
		return err
	}
	location, err := d.paramOrEnv(p, "vertex_location", "VERTEXAI_LOCATION")
	if err != nil {
		return err
	}
	if location == "" {
		location = "us-central1"
	}
	credsParam, err := d.paramStr(p, "vertex_credentials")
	if err != nil {
		return err
	}
	vs := &vertexSigner{}
	if credsParam != "" {
		js := []byte(credsParam)
		if !strings.HasPrefix(strings.TrimSpace(credsParam), "{") {
			// a file of the gateway's host, as GOOGLE_APPLICATION_CREDENTIALS names one: the
			// operator's credentials, not the database writer's
			if err := d.implicitChain("vertex_credentials", "GOOGLE_APPLICATION_CREDENTIALS"); err != nil {
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
		if err := d.implicitChain("vertex_credentials", "GOOGLE_APPLICATION_CREDENTIALS"); err != nil {
			return fmt.Errorf("%w (without vertex_credentials Application Default Credentials would be used)", err)
		}
		vs.adc = &lazyValue[oauth2.TokenSource]{find: func() (oauth2.TokenSource, error) {
			creds, err := google.FindDefaultCredentials(tokenContext, vertexScope)
			if err != nil {
				return nil, err
			}
			return creds.TokenSource, nil
		}}
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
		d.APIBase = base
	}
	publisher := "google"
	if strings.HasPrefix(d.Model, "claude") {
		publisher = "anthropic"
	}
	prefix := strings.TrimSuffix(base, "/v1") + "/v1/projects/" + url.PathEscape(project) + "/locations/" + url.PathEscape(location) +
		"/publishers/" + publisher + "/models/" + url.PathEscape(d.Model)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "lockstep")
	for k, v := range d.ExtraHeaders {
		h.Set(k, v)
	}
	d.header = h
	d.urls = [numFormats]string{}
	if publisher == "anthropic" {
		d.wire, d.vertexAnthropic, d.native = wireAnthropic, true, nil
		d.urls[FormatMessages] = prefix + ":rawPredict"
		d.streamURL = prefix + ":streamRawPredict"
	} else {
		d.native = geminiAPI{}
		d.embedder = newVertexEmbed(prefix, d.Model)
		d.urls[formatNative] = prefix + ":generateContent"
		d.streamURL = prefix + ":streamGenerateContent?alt=sse"
	}
	d.signer = vs
	return nil
}

// tokenContext is the context token sources keep: its HTTP client bounds each token request.
var tokenContext = context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: 30 * time.Second})

// vertexSigner puts a Google OAuth2 access token on each request. Only successes are cached:
// the token source keeps a token until 10 s before it expires (oauth2.ReuseTokenSource) and
// fetches again after a failed fetch; Application Default Credentials are looked up again
// after a failed lookup (lazyValue).
type vertexSigner struct {
	ts  oauth2.TokenSource             // vertex_credentials; nil with ADC
	adc *lazyValue[oauth2.TokenSource] // Application Default Credentials, found on first use
}

func (v *vertexSigner) sign(_ context.Context, req *http.Request, _ []byte) error {
	ts := v.ts
	if v.adc != nil {
		var err error
		if ts, err = v.adc.get(); err != nil {
			return &UpstreamError{Status: 401, Type: "authentication_error", Message: "vertex_ai: no credentials: set litellm_params.vertex_credentials or Application Default Credentials: " + err.Error()}
		}
	}
	tok, err := ts.Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return &UpstreamError{Status: 401, Type: "authentication_error", Message: "vertex_ai: access token refused: " + err.Error()}
		}
		return &UpstreamError{Status: 502, Message: "vertex_ai: get access token: " + err.Error(), Retryable: true}
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}
