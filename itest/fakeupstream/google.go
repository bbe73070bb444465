package fakeupstream

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// APIGemini is Google's generateContent API (AI Studio and Vertex AI).
const APIGemini API = "gemini"

// StartGemini starts a fake Google AI Studio endpoint: POST
// /v1beta/models/{model}:generateContent and :streamGenerateContent?alt=sse
// (https://ai.google.dev/api/generate-content). It checks the API key (x-goog-api-key header
// or key= query parameter; a wrong one is 400 INVALID_ARGUMENT "API key not valid", as Google
// answers), a JSON body with non-empty "contents" whose roles are "user" or "model", and
// honours generationConfig.maxOutputTokens by cutting the answer (finishReason MAX_TOKENS).
// It also serves the embeddings API, :embedContent and :batchEmbedContents (embed_native.go).
func StartGemini(t testing.TB, apiKey string, opts ...Option) *Server {
	s := Start(t, opts...)
	s.native = func(w http.ResponseWriter, r *http.Request, body []byte) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
		if !ok || r.Method != http.MethodPost {
			writeGoogleError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
			return
		}
		key := r.Header.Get("x-goog-api-key")
		if key == "" {
			key = r.URL.Query().Get("key")
		}
		if key != apiKey {
			writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
			return
		}
		s.gemini(w, r, rest, body)
	}
	return s
}

func writeGoogleError(w http.ResponseWriter, code int, status, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

// gemini serves "{model}:{method}" of the generateContent API.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request, modelMethod string, body []byte) {
	model, method, _ := strings.Cut(modelMethod, ":")
	if method == "embedContent" || method == "batchEmbedContents" {
		s.geminiEmbed(w, model, method, body)
		return
	}
	stream := method == "streamGenerateContent"
	if !stream && method != "generateContent" {
		writeGoogleError(w, http.StatusNotFound, "NOT_FOUND", "method "+method+" not found")
		return
	}
	if stream && r.URL.Query().Get("alt") != "sse" {
		writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "fake: only alt=sse streams are served")
		return
	}
	if code := int(s.status.Load()); code != 0 && (code < 200 || code > 299) {
		writeGoogleError(w, code, "UNAVAILABLE", fmt.Sprintf("fake upstream error %d", code))
		return
	}
	if !gjson.ValidBytes(body) {
		writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
		return
	}
	j := gjson.ParseBytes(body)
	contents := j.Get("contents").Array()
	if len(contents) == 0 {
		writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	var userText string
	for _, c := range contents {
		role := c.Get("role").Str
		if role != "user" && role != "model" {
			writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Please use a valid role: user, model.")
			return
		}
		if role == "user" {
			var texts []string
			c.Get("parts").ForEach(func(_, p gjson.Result) bool {
				if t := p.Get("text"); t.Exists() {
					texts = append(texts, t.Str)
				}
				return true
			})
			userText = strings.Join(texts, "\n")
		}
	}
	in := ReplyInput{API: APIGemini, Path: r.URL.Path, Model: model, Text: userText, Stream: stream, Body: body, Header: r.Header}
	text, cut := truncate(s.cfg.reply(in), j.Get("generationConfig.maxOutputTokens").Int())
	finish := "STOP"
	if cut {
		finish = "MAX_TOKENS"
	}
	n := s.seq.Add(1)
	call := s.geminiToolCall(j, userText)
	if call != nil {
		text = ""
	}
	usage := map[string]any{"promptTokenCount": tokens(userText), "candidatesTokenCount": tokens(text), "totalTokenCount": tokens(userText) + tokens(text)}
	resp := func(text string, final bool) map[string]any {
		part := map[string]any{"text": text}
		if call != nil {
			part = map[string]any{"functionCall": call}
		}
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "index": 0}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": fmt.Sprintf("fakegem%d", n)}
		if final {
			cand["finishReason"] = finish
			out["usageMetadata"] = usage
		}
		return out
	}
	if !stream {
		writeJSON(w, http.StatusOK, resp(text, true))
		return
	}
	e := s.startSSE(w, r)
	parts := split(text, s.cfg.chunks)
	if call != nil {
		parts = []string{""} // a function call comes whole, in one chunk, as Gemini streams it
	}
	for i, part := range parts {
		if !e.frame("", resp(part, i == len(parts)-1)) {
			return
		}
	}
}

// geminiToolCall is the functionCall part the fake answers with (see [WithToolCalls]): a call
// of the first function declared in tools[].functionDeclarations, args {"input": "<Text>"},
// unless the last content carries a functionResponse part (the tool's result came back).
// Like the AI Studio API it gives the call no id.
func (s *Server) geminiToolCall(j gjson.Result, userText string) map[string]any {
	name := j.Get("tools.0.functionDeclarations.0.name").Str
	if !s.cfg.toolCalls || name == "" {
		return nil
	}
	contents := j.Get("contents").Array()
	for _, p := range contents[len(contents)-1].Get("parts").Array() {
		if p.Get("functionResponse").Exists() {
			return nil
		}
	}
	return map[string]any{"name": name, "args": map[string]any{"input": userText}}
}

// Vertex is a fake Vertex AI endpoint with its own OAuth2 token endpoint.
type Vertex struct {
	*Server
	// Project is the only project the fake serves.
	Project string

	key    *rsa.PrivateKey
	email  string
	mu     sync.Mutex
	tokens map[string]bool
	issued int
	// failTokens token requests left to fail with failTokenCode.
	failTokens, failTokenCode int
}

// StartVertex starts a fake Vertex AI: POST
// /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent
// (and :streamGenerateContent?alt=sse), publishers/anthropic/models/{model}:rawPredict (and
// :streamRawPredict, Anthropic Messages bodies with anthropic_version "vertex-2023-10-16" and no
// "model"), and an OAuth2 token endpoint at /token that, like Google's, takes a JWT-bearer
// assertion signed with the service account's private key (RS256, verified here with its
// public key, iss = client_email, aud = token_uri, the cloud-platform scope, not expired) and
// issues a short random access token. Model calls need one of the issued tokens as
// "Authorization: Bearer" (401 UNAUTHENTICATED otherwise) and the fake's project (403
// PERMISSION_DENIED otherwise). [Vertex.ServiceAccountJSON] is a key file naming that token URI.
// Text embedding models answer publishers/google/models/{model}:predict (embed_native.go).
func StartVertex(t testing.TB, project string, opts ...Option) *Vertex {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("fakeupstream: rsa key: %v", err)
	}
	v := &Vertex{Server: Start(t, opts...), Project: project, key: key, email: "gateway@" + project + ".iam.gserviceaccount.com", tokens: map[string]bool{}}
	v.native = v.serve
	return v
}

// ServiceAccountJSON returns a service-account key file (the format Google issues) whose
// token_uri is this fake's /token.
func (v *Vertex) ServiceAccountJSON() string {
	der, _ := x509.MarshalPKCS8PrivateKey(v.key)
	b, _ := json.Marshal(map[string]any{
		"type": "service_account", "project_id": v.Project, "private_key_id": "fakekeyid1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": v.email, "client_id": "1234567890",
		"auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": v.URL + "/token",
	})
	return string(b)
}

// FailTokens makes the next n token requests fail with status code (a JSON OAuth2 error, as
// Google's endpoint answers when it is unavailable), then issues tokens again.
func (v *Vertex) FailTokens(n, code int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.failTokens, v.failTokenCode = n, code
}

// TokensIssued is how many access tokens the token endpoint issued.
func (v *Vertex) TokensIssued() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.issued
}

func (v *Vertex) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.URL.Path == "/token" {
		v.mu.Lock()
		fail := v.failTokens > 0
		if fail {
			v.failTokens--
		}
		code := v.failTokenCode
		v.mu.Unlock()
		if fail {
			writeJSON(w, code, map[string]any{"error": "internal_failure", "error_description": "The service is currently unavailable."})
			return
		}
		v.token(w, body)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	v.mu.Lock()
	ok := v.tokens[tok]
	v.mu.Unlock()
	if !ok {
		writeGoogleError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/projects/")
	parts := strings.Split(rest, "/")
	// {project}/locations/{location}/publishers/{publisher}/models/{model}:{method}
	if !ok || len(parts) != 7 || parts[1] != "locations" || parts[3] != "publishers" || parts[5] != "models" {
		writeGoogleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL "+r.URL.Path+" was not found on this server.")
		return
	}
	if parts[0] != v.Project {
		writeGoogleError(w, http.StatusForbidden, "PERMISSION_DENIED", "Permission denied on resource project "+parts[0]+".")
		return
	}
	switch parts[4] {
	case "google":
		if model, ok := strings.CutSuffix(parts[6], ":predict"); ok {
			v.vertexEmbed(w, model, body)
			return
		}
		v.gemini(w, r, parts[6], body)
	case "anthropic":
		model, method, _ := strings.Cut(parts[6], ":")
		if method != "rawPredict" && method != "streamRawPredict" {
			writeGoogleError(w, http.StatusNotFound, "NOT_FOUND", "method "+method+" not found")
			return
		}
		j := gjson.ParseBytes(body)
		if !gjson.ValidBytes(body) || j.Get("anthropic_version").Str != "vertex-2023-10-16" {
			writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic_version: Input should be 'vertex-2023-10-16'")
			return
		}
		if j.Get("model").Exists() {
			writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "model: Extra inputs are not permitted")
			return
		}
		if j.Get("max_tokens").Type != gjson.Number || !j.Get("messages").IsArray() {
			writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens and messages are required")
			return
		}
		in := ReplyInput{API: APIMessages, Path: r.URL.Path, Model: model, Text: lastUserText(j.Get("messages")), Stream: j.Get("stream").Bool(), Body: body, Header: r.Header}
		v.messages(w, r, in, v.seq.Add(1))
	default:
		writeGoogleError(w, http.StatusNotFound, "NOT_FOUND", "publisher "+parts[4]+" not found")
	}
}

// token is Google's OAuth2 token endpoint for service accounts (RFC 7523 JWT bearer grant,
// https://developers.google.com/identity/protocols/oauth2/service-account#httprest).
func (v *Vertex) token(w http.ResponseWriter, body []byte) {
	bad := func(msg string) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": msg})
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		bad(err.Error())
		return
	}
	if form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type", "error_description": "Invalid grant_type: " + form.Get("grant_type")})
		return
	}
	segs := strings.Split(form.Get("assertion"), ".")
	if len(segs) != 3 {
		bad("Invalid JWT: Token must be a short-lived token and in a reasonable timeframe")
		return
	}
	sig, err := base64.RawURLEncoding.DecodeString(segs[2])
	if err != nil {
		bad("Invalid JWT Signature.")
		return
	}
	h := sha256.Sum256([]byte(segs[0] + "." + segs[1]))
	if rsa.VerifyPKCS1v15(&v.key.PublicKey, crypto.SHA256, h[:], sig) != nil {
		bad("Invalid JWT Signature.")
		return
	}
	claims, err := base64.RawURLEncoding.DecodeString(segs[1])
	if err != nil || !gjson.ValidBytes(claims) {
		bad("Invalid JWT: claims")
		return
	}
	c := gjson.ParseBytes(claims)
	switch {
	case c.Get("iss").Str != v.email:
		bad("Invalid JWT: iss")
		return
	case c.Get("aud").Str != v.URL+"/token":
		bad("Invalid JWT: aud")
		return
	case !strings.Contains(c.Get("scope").Str, "https://www.googleapis.com/auth/cloud-platform"):
		bad("Invalid JWT: scope")
		return
	case c.Get("exp").Int() < time.Now().Unix():
		bad("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
		return
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	tok := "ya29.fake-" + hex.EncodeToString(raw[:])
	v.mu.Lock()
	v.tokens[tok] = true
	v.issued++
	v.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "expires_in": 3599, "token_type": "Bearer"})
}
