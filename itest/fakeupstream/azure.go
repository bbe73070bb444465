package fakeupstream

import (
	"net/http"
	"strings"
	"testing"
)

// Azure is what the Azure OpenAI fake requires of every request.
type Azure struct {
	// APIVersion is the api-version query parameter every request must carry.
	APIVersion string
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
func StartAzure(t testing.TB, az Azure, opts ...Option) *Server {
	s := Start(t, opts...)
	s.front = func(w http.ResponseWriter, r *http.Request) bool {
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
		case v != az.APIVersion:
			writeOpenAIError(w, http.StatusBadRequest, "BadRequest", "API version not supported")
			return false
		}
		key := r.Header.Get("api-key")
		tok, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !((az.APIKey != "" && key == az.APIKey) || (az.ADToken != "" && bearer && tok == az.ADToken)) {
			writeOpenAIError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
			return false
		}
		r.URL.Path = "/v1/" + route
		r.Header.Set("Authorization", "Bearer azure-checked")
		return true
	}
	return s
}
