package fakeupstream

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Azure is what the Azure OpenAI fake requires of every request.
type Azure struct {
	// APIVersion is the api-version query parameter every deployment request must carry
	// (AlsoAPIVersions are accepted too).
	APIVersion      string
	AlsoAPIVersions []string
	// APIKey is the api-key header value accepted; ADToken the bearer token accepted instead
	// (Microsoft Entra ID). Either may be empty (not accepted).
	APIKey, ADToken string
}

// StartAzure starts a fake Azure OpenAI resource: POST
// /openai/deployments/{deployment}/{chat/completions|completions|embeddings|images/generations|
// audio/speech|audio/transcriptions}?api-version=… with an api-key header (or a bearer Entra
// ID token), as the real service checks them: an unknown path is 404 DeploymentNotFound-style,
// a missing or wrong api-version 400, a wrong key 401. The deployment name is served as the
// model (the body's "model" is optional, as on Azure).
//
// The Responses API is not under a deployment: POST /openai/responses?api-version=… (a version
// from 2025-03-01-preview on, as Azure requires) or the v1 API, POST /openai/v1/responses
// (api-version absent, "preview" or "latest"); the deployment is the body's "model", which is
// required.
func StartAzure(t testing.TB, az Azure, opts ...Option) *Server {
	s := Start(t, opts...)
	s.front = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/openai/responses" || r.URL.Path == "/openai/v1/responses" {
			v := r.URL.Query().Get("api-version")
			if r.URL.Path == "/openai/v1/responses" {
				if v != "" && v != "preview" && v != "latest" {
					writeOpenAIError(w, http.StatusBadRequest, "BadRequest", "API version not supported")
					return false
				}
			} else if v == "" {
				writeOpenAIError(w, http.StatusBadRequest, "404", "Missing API version query parameter.")
				return false
			} else if v < "2025-03-01-preview" {
				writeOpenAIError(w, http.StatusBadRequest, "BadRequest", "Azure OpenAI Responses API is enabled only for api-version 2025-03-01-preview and later")
				return false
			}
			if !az.authorized(r) {
				writeAzureDenied(w)
				return false
			}
			r.URL.Path = "/v1/responses"
			r.Header.Set("Authorization", "Bearer azure-checked")
			return true
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/openai/deployments/")
		dep, route, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || dep == "" {
			writeOpenAIError(w, http.StatusNotFound, "404", "Resource not found")
			return false
		}
		switch v := r.URL.Query().Get("api-version"); {
		case v == "":
			writeOpenAIError(w, http.StatusBadRequest, "404", "Missing API version query parameter.")
			return false
		case v != az.APIVersion && !slices.Contains(az.AlsoAPIVersions, v):
			writeOpenAIError(w, http.StatusBadRequest, "BadRequest", "API version not supported")
			return false
		}
		if !az.authorized(r) {
			writeAzureDenied(w)
			return false
		}
		r.URL.Path = "/v1/" + route
		r.Header.Set("Authorization", "Bearer azure-checked")
		return true
	}
	return s
}

// authorized checks the api-key header or the Entra ID bearer token.
func (az Azure) authorized(r *http.Request) bool {
	key := r.Header.Get("api-key")
	tok, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return (az.APIKey != "" && key == az.APIKey) || (az.ADToken != "" && bearer && tok == az.ADToken)
}

func writeAzureDenied(w http.ResponseWriter) {
	writeOpenAIError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
}
