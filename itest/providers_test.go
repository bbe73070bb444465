package itest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/provider"
)

// createModel creates a model on g (admin) and fails the test unless it is accepted.
func createModel(t *testing.T, g *Gateway, name string, params map[string]any) {
	t.Helper()
	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": name, "litellm_params": params})
	require.Equal(t, 200, st, "%s", b)
}

// exerciseModel calls model group name on g right away with the official SDKs — chat, streamed
// chat (with include_usage), /v1/messages (plain and streamed) and /v1/responses (plain and
// streamed) — and checks the answer text (want(user text)), the stop reasons and that the
// usage the upstream reported came through (non-zero prompt and completion tokens, the same
// in every format).
func exerciseModel(t *testing.T, g *Gateway, name string, want func(string) string) {
	t.Helper()
	ctx := context.Background()
	oa := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	an := anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAPIKey(MasterKey), aoption.WithMaxRetries(0))

	cc, err := oa.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: name,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("chat with " + name)}})
	require.NoError(t, err, name)
	require.Equal(t, want("chat with "+name), cc.Choices[0].Message.Content, name)
	require.Equal(t, "stop", cc.Choices[0].FinishReason, name)
	require.Positive(t, cc.Usage.PromptTokens, name)
	require.Positive(t, cc.Usage.CompletionTokens, name)
	require.Equal(t, cc.Usage.PromptTokens+cc.Usage.CompletionTokens, cc.Usage.TotalTokens, name)

	cs := oa.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: name,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream with " + name)},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	require.NoError(t, cs.Err(), name)
	require.Equal(t, want("stream with "+name), acc.Choices[0].Message.Content, name)
	require.Equal(t, "stop", acc.Choices[0].FinishReason, name)
	require.Positive(t, acc.Usage.PromptTokens, name)
	require.Positive(t, acc.Usage.CompletionTokens, name)

	msg, err := an.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("messages with " + name))}})
	require.NoError(t, err, name)
	require.Equal(t, want("messages with "+name), msg.Content[0].Text, name)
	require.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason, name)
	require.Positive(t, msg.Usage.InputTokens, name)
	require.Positive(t, msg.Usage.OutputTokens, name)

	ms := an.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("messages stream with " + name))}})
	var macc anthropic.Message
	for ms.Next() {
		require.NoError(t, macc.Accumulate(ms.Current()))
	}
	require.NoError(t, ms.Err(), name)
	require.Equal(t, want("messages stream with "+name), macc.Content[0].Text, name)
	require.Equal(t, anthropic.StopReasonEndTurn, macc.StopReason, name)
	require.Positive(t, macc.Usage.OutputTokens, name)

	r, err := oa.Responses.New(ctx, responses.ResponseNewParams{Model: name,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("responses with " + name)}})
	require.NoError(t, err, name)
	require.Equal(t, want("responses with "+name), r.OutputText(), name)
	require.Equal(t, responses.ResponseStatusCompleted, r.Status, name)
	require.Positive(t, r.Usage.InputTokens, name)
	require.Positive(t, r.Usage.OutputTokens, name)

	rs := oa.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: name,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("responses stream with " + name)}})
	var text strings.Builder
	var done *responses.Response
	for rs.Next() {
		ev := rs.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			resp := ev.Response
			done = &resp
		}
	}
	require.NoError(t, rs.Err(), name)
	require.Equal(t, want("responses stream with "+name), text.String(), name)
	require.NotNil(t, done, name)
	require.Positive(t, done.Usage.OutputTokens, name)
}

func fakeReply(s string) string { return "fake reply to: " + s }

// Azure OpenAI: created on A, used on B at once through every format; the fake checks the
// deployment path, api-version and api-key (or the Entra ID bearer token) as Azure does.
func TestAzureProvider(t *testing.T) {
	t.Parallel()
	az := fakeupstream.StartAzure(t, fakeupstream.Azure{APIVersion: "2025-04-01-preview", AlsoAPIVersions: []string{provider.DefaultAzureAPIVersion},
		APIKey: "az-secret-key-1", ADToken: "ad-token-123456"})
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "az", map[string]any{"model": "azure/gpt4o-dep", "api_base": az.URL, "api_key": "az-secret-key-1", "api_version": "2025-04-01-preview"})
	exerciseModel(t, p.B, "az", fakeReply)
	req, ok := az.LastRequest("/openai/deployments/gpt4o-dep/chat/completions")
	require.True(t, ok, "no request on the Azure deployment path: %+v", az.Requests())
	require.Equal(t, "api-version=2025-04-01-preview", req.Query)
	require.Equal(t, "az-secret-key-1", req.Header.Get("api-key"))
	// /v1/responses goes to Azure's own Responses API (as LiteLLM sends it), the deployment in
	// the body, not translated to chat: streamed and not.
	var rs []fakeupstream.Request
	for _, r := range az.Requests() {
		if r.Path == "/openai/responses" {
			rs = append(rs, r)
		}
	}
	require.Len(t, rs, 2, "one plain and one streamed /v1/responses call: %+v", az.Requests())
	for _, r := range rs {
		require.Equal(t, "api-version=2025-04-01-preview", r.Query)
		require.Equal(t, "gpt4o-dep", gjson.GetBytes(r.Body, "model").Str)
		require.Equal(t, "az-secret-key-1", r.Header.Get("api-key"))
	}

	// azure_ad_token as the bearer; the default api-version is the GA one the fake wants, and
	// responses use LiteLLM's default: the v1 API with api-version=preview.
	az.Reset()
	createModel(t, p.A, "az-ad", map[string]any{"model": "azure/gpt4o-dep", "api_base": az.URL, "azure_ad_token": "ad-token-123456"})
	exerciseModel(t, p.B, "az-ad", fakeReply)
	req, ok = az.LastRequest("/openai/v1/responses")
	require.True(t, ok, "no request on the v1 Responses API: %+v", az.Requests())
	require.Equal(t, "api-version=preview", req.Query)
	require.Equal(t, "Bearer ad-token-123456", req.Header.Get("Authorization"))

	// A wrong key is the upstream's 401, with the key redacted.
	createModel(t, p.A, "az-bad", map[string]any{"model": "azure/gpt4o-dep", "api_base": az.URL, "api_key": "wrong-key-999", "max_retries": 0})
	st, b := p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "az-bad", "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	require.Equal(t, 401, st, "%s", b)
	require.Contains(t, string(b), "Access denied")

	// The official SDK's Azure client against the gateway's Azure-style routes, the
	// gateway key in api-key.
	ctx := context.Background()
	ac := openai.NewClient(azure.WithEndpoint(p.B.URL, "2024-10-21"), azure.WithAPIKey(MasterKey), azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0))
	cc, err := ac.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "az",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("via azure sdk")}})
	require.NoError(t, err)
	require.Equal(t, fakeReply("via azure sdk"), cc.Choices[0].Message.Content)
	cs := ac.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "az",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("azure sdk stream")}})
	var acc openai.ChatCompletionAccumulator
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	require.NoError(t, cs.Err())
	require.Equal(t, fakeReply("azure sdk stream"), acc.Choices[0].Message.Content)
	comp, err := ac.Completions.New(ctx, openai.CompletionNewParams{Model: "az",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("complete me")}})
	require.NoError(t, err)
	require.Equal(t, fakeReply("complete me"), comp.Choices[0].Text)
	emb, err := ac.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "az",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
	require.NoError(t, err)
	require.Len(t, emb.Data, 2)
	_, ok = az.LastRequest("/openai/deployments/gpt4o-dep/embeddings")
	require.True(t, ok)
	// Its Responses API: /openai/responses?api-version=…, the model group in the body.
	rsp, err := ac.Responses.New(ctx, responses.ResponseNewParams{Model: "az", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("azure sdk responses")}})
	require.NoError(t, err)
	require.Equal(t, fakeReply("azure sdk responses"), rsp.OutputText())

	// A wrong gateway key in api-key is refused.
	bad := openai.NewClient(azure.WithEndpoint(p.B.URL, "2024-10-21"), azure.WithAPIKey("sk-not-a-key"), azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0))
	_, err = bad.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "az",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var oerr *openai.Error
	require.ErrorAs(t, err, &oerr)
	require.Equal(t, 401, oerr.StatusCode)
}

// /v1/completions (plain and streamed), images, moderations and audio pass through to an
// OpenAI-compatible upstream with only "model" edited; an Anthropic deployment answers a 400
// naming its provider. Official SDK on B, models created on A.
func TestPassthroughRoutes(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "oai", map[string]any{"model": "openai/up-model", "api_base": up.URL + "/v1", "api_key": "sk-up"})
	createModel(t, p.A, "claude", map[string]any{"model": "anthropic/claude-x", "api_base": up.URL, "api_key": "sk-up"})
	ctx := context.Background()
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))

	comp, err := oa.Completions.New(ctx, openai.CompletionNewParams{Model: "oai",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon")}})
	require.NoError(t, err)
	require.Equal(t, fakeReply("once upon"), comp.Choices[0].Text)
	require.Equal(t, "stop", string(comp.Choices[0].FinishReason))
	require.Positive(t, comp.Usage.CompletionTokens)
	req, ok := up.LastRequest("/v1/completions")
	require.True(t, ok)
	require.Equal(t, "up-model", gjsonGet(req.Body, "model"))

	cs := oa.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "oai",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("stream upon")}})
	var text strings.Builder
	for cs.Next() {
		if ch := cs.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
		}
	}
	require.NoError(t, cs.Err())
	require.Equal(t, fakeReply("stream upon"), text.String())

	img, err := oa.Images.Generate(ctx, openai.ImageGenerateParams{Model: "oai", Prompt: "a red fox", N: openai.Int(2)})
	require.NoError(t, err)
	require.Len(t, img.Data, 2)
	require.Equal(t, "https://images.fake.invalid/1.png", img.Data[1].URL)
	req, _ = up.LastRequest("/v1/images/generations")
	require.Equal(t, "up-model", gjsonGet(req.Body, "model"))

	mod, err := oa.Moderations.New(ctx, openai.ModerationNewParams{Model: "oai",
		Input: openai.ModerationNewParamsInputUnion{OfString: openai.String("please flag-me")}})
	require.NoError(t, err)
	require.True(t, mod.Results[0].Flagged)

	sp, err := oa.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "oai", Input: "say this",
		Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
	require.NoError(t, err)
	audio, err := io.ReadAll(sp.Body)
	sp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, "FAKEAUDIO:say this", string(audio))
	require.Equal(t, "audio/mpeg", sp.Header.Get("Content-Type"))

	tr, err := oa.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{Model: "oai",
		File: openai.File(strings.NewReader("RIFF-fake-wav"), "hello.wav", "audio/wav")})
	require.NoError(t, err)
	require.Equal(t, "transcript of hello.wav by up-model: RIFF-fake-wav", tr.Text)

	// A provider that has no such route: 400 naming the provider.
	_, err = oa.Completions.New(ctx, openai.CompletionNewParams{Model: "claude",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}})
	var oerr *openai.Error
	require.ErrorAs(t, err, &oerr)
	require.Equal(t, 400, oerr.StatusCode)
	require.Contains(t, oerr.Message, "/completions not supported by provider anthropic")
	st, b := p.B.Do(t, "POST", "/v1/images/generations", map[string]any{"model": "claude", "prompt": "x"})
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, string(b), "/images/generations not supported by provider anthropic")
}

// gjsonGet returns the string at path in a JSON body.
func gjsonGet(body []byte, path string) string { return gjson.GetBytes(body, path).String() }

// checkLengthStop asks for at most 2 tokens and checks the upstream's "length" stop arrives as
// finish_reason "length" (chat) and stop_reason "max_tokens" (messages).
func checkLengthStop(t *testing.T, g *Gateway, name string) {
	t.Helper()
	st, b := g.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": name, "max_tokens": 2,
		"messages": []any{map[string]any{"role": "user", "content": "a long question here"}}})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "length", gjsonGet(b, "choices.0.finish_reason"), "%s", b)
	require.Equal(t, "fake reply", gjsonGet(b, "choices.0.message.content"), "%s", b)
	st, b = g.Do(t, "POST", "/v1/messages", map[string]any{"model": name, "max_tokens": 2,
		"messages": []any{map[string]any{"role": "user", "content": "a long question here"}}})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "max_tokens", gjsonGet(b, "stop_reason"), "%s", b)
}

// Ollama's native /api/chat (NDJSON streams): created on A, used on B at once.
func TestOllamaProvider(t *testing.T) {
	t.Parallel()
	up := fakeupstream.StartOllama(t)
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "llama", map[string]any{"model": "ollama/llama3.2", "api_base": up.URL})
	exerciseModel(t, p.B, "llama", fakeReply)
	checkLengthStop(t, p.B, "llama")
	req, ok := up.LastRequest("/api/chat")
	require.True(t, ok)
	require.Equal(t, "llama3.2", gjsonGet(req.Body, "model"))
	require.Equal(t, "2", gjsonGet(req.Body, "options.num_predict"))

	// Routes Ollama's native API has no endpoint for: 400 naming the provider.
	st, b := p.B.Do(t, "POST", "/v1/images/generations", map[string]any{"model": "llama", "prompt": "x"})
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, string(b), "/images/generations not supported by provider ollama")
}

// Native embeddings behind /v1/embeddings: Gemini embedContent (one input) and
// batchEmbedContents (several), Vertex AI :predict (text-embedding-*, and gemini-embedding-*
// one input per call), Ollama /api/embed, Bedrock InvokeModel with Titan (one call per
// input, SigV4-verified) and Cohere. Created on A, called with the official SDK on B; each
// vector is exactly what the fake upstream computed for that input, in input order, in float
// and base64 form, and usage carries the provider's own token count (Gemini reports none).
func TestNativeEmbeddings(t *testing.T) {
	t.Parallel()
	gem := fakeupstream.StartGemini(t, "gem-embed-key")
	ol := fakeupstream.StartOllama(t)
	vx := fakeupstream.StartVertex(t, "proj-embed")
	brc := fakeupstream.Bedrock{Region: "eu-west-1", AccessKeyID: "AKIAEMBEDTEST001", SecretAccessKey: "embed/test/secret/001"}
	br := fakeupstream.StartBedrock(t, brc)
	p := StartPair(t, GatewayOpts{})
	aws := map[string]any{"api_base": br.URL, "aws_region_name": brc.Region, "aws_access_key_id": brc.AccessKeyID, "aws_secret_access_key": brc.SecretAccessKey}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	createModel(t, p.A, "e-gemini", map[string]any{"model": "gemini/gemini-embedding-001", "api_base": gem.URL, "api_key": "gem-embed-key"})
	createModel(t, p.A, "e-ollama", map[string]any{"model": "ollama/nomic-embed-text", "api_base": ol.URL})
	createModel(t, p.A, "e-vertex", map[string]any{"model": "vertex_ai/text-embedding-005", "api_base": vx.URL, "vertex_credentials": vx.ServiceAccountJSON()})
	createModel(t, p.A, "e-vgemini", map[string]any{"model": "vertex_ai/gemini-embedding-001", "api_base": vx.URL, "vertex_credentials": vx.ServiceAccountJSON()})
	createModel(t, p.A, "e-titan", with(aws, "model", "bedrock/amazon.titan-embed-text-v2:0"))
	createModel(t, p.A, "e-cohere", with(aws, "model", "bedrock/cohere.embed-english-v3"))
	createModel(t, p.A, "e-claude", with(aws, "model", "bedrock/anthropic.claude-3-haiku-20240307-v1:0"))

	ctx := context.Background()
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	words := func(s string) int64 { return int64(len(strings.Fields(s))) }
	inputs := []string{"the first text", "a second one", "third"}
	for _, tc := range []struct {
		model  string
		up     *fakeupstream.Server
		dims   int // 0: the fake's default (8)
		tokens func([]string) int64
	}{
		{"e-gemini", gem, 16, func([]string) int64 { return 0 }},
		{"e-ollama", ol, 12, nil},
		{"e-vertex", vx.Server, 10, nil},
		{"e-vgemini", vx.Server, 0, nil},
		{"e-titan", br, 24, nil},
		{"e-cohere", br, 0, nil},
	} {
		for _, in := range [][]string{inputs[:1], inputs} {
			params := openai.EmbeddingNewParams{Model: tc.model, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: in}}
			if len(in) == 1 {
				params.Input = openai.EmbeddingNewParamsInputUnion{OfString: openai.String(in[0])}
			}
			dims := 8
			if tc.dims > 0 {
				dims = tc.dims
				params.Dimensions = openai.Int(int64(tc.dims))
			}
			for _, b64 := range []bool{false, true} {
				name := fmt.Sprintf("%s/%d inputs/base64=%v", tc.model, len(in), b64)
				params.EncodingFormat = ""
				if b64 {
					params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
				}
				res, err := oa.Embeddings.New(ctx, params)
				require.NoError(t, err, name)
				require.Len(t, res.Data, len(in), name)
				var want int64
				for i, text := range in {
					require.Equal(t, int64(i), res.Data[i].Index, name)
					require.Equal(t, fakeupstream.Vector(text, dims), res.Data[i].Embedding, name)
					want += words(text)
				}
				if tc.tokens != nil {
					want = tc.tokens(in)
				}
				require.Equal(t, want, res.Usage.PromptTokens, name)
			}
		}
	}

	// What each upstream was sent, in its own wire format.
	req, ok := gem.LastRequest("/v1beta/models/gemini-embedding-001:batchEmbedContents")
	require.True(t, ok, "%+v", gem.Requests())
	require.Equal(t, "models/gemini-embedding-001", gjsonGet(req.Body, "requests.1.model"))
	require.Equal(t, "a second one", gjsonGet(req.Body, "requests.1.content.parts.0.text"))
	require.Equal(t, "16", gjsonGet(req.Body, "requests.0.outputDimensionality"))
	require.Equal(t, "gem-embed-key", req.Header.Get("x-goog-api-key"))
	_, ok = gem.LastRequest("/v1beta/models/gemini-embedding-001:embedContent")
	require.True(t, ok)
	req, ok = vx.LastRequest("/v1/projects/proj-embed/locations/us-central1/publishers/google/models/text-embedding-005:predict")
	require.True(t, ok, "%+v", vx.Requests())
	require.JSONEq(t, `{"instances":[{"content":"the first text"},{"content":"a second one"},{"content":"third"}],"parameters":{"outputDimensionality":10}}`, string(req.Body))
	require.True(t, strings.HasPrefix(req.Header.Get("Authorization"), "Bearer "))
	vg := 0
	for _, r := range vx.Requests() {
		if strings.HasSuffix(r.Path, "/gemini-embedding-001:predict") {
			vg++
		}
	}
	require.Equal(t, 2*(1+len(inputs)), vg, "gemini-embedding-001 takes one input per call on Vertex AI")
	req, ok = ol.LastRequest("/api/embed")
	require.True(t, ok)
	require.JSONEq(t, `{"model":"nomic-embed-text","input":["the first text","a second one","third"],"dimensions":12}`, string(req.Body))
	req, ok = br.LastRequest("/model/cohere.embed-english-v3/invoke")
	require.True(t, ok, "%+v", br.Requests())
	require.JSONEq(t, `{"texts":["the first text","a second one","third"],"input_type":"search_document"}`, string(req.Body))
	titan := 0
	for _, r := range br.Requests() {
		if r.Path == "/model/amazon.titan-embed-text-v2:0/invoke" {
			titan++
			require.Contains(t, r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+brc.AccessKeyID)
		}
	}
	require.Equal(t, 2*(1+len(inputs)), titan, "Titan takes one input per call")

	// Token arrays have no text for a native API; a chat model has no embeddings: 400s naming
	// the provider.
	st, b := p.B.Do(t, "POST", "/v1/embeddings", map[string]any{"model": "e-ollama", "input": []any{[]int{1, 2, 3}}})
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, string(b), "token arrays are not supported by provider ollama")
	st, b = p.B.Do(t, "POST", "/v1/embeddings", map[string]any{"model": "e-claude", "input": "x"})
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, string(b), "/embeddings not supported by provider bedrock")
}

// Google AI Studio's generateContent: created on A, used on B at once; the key travels in
// x-goog-api-key.
func TestGeminiProvider(t *testing.T) {
	t.Parallel()
	up := fakeupstream.StartGemini(t, "gem-key-123456")
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "gem", map[string]any{"model": "gemini/gemini-2.0-flash", "api_base": up.URL, "api_key": "gem-key-123456"})
	exerciseModel(t, p.B, "gem", fakeReply)
	checkLengthStop(t, p.B, "gem")
	req, ok := up.LastRequest("/v1beta/models/gemini-2.0-flash:streamGenerateContent")
	require.True(t, ok, "%+v", up.Requests())
	require.Equal(t, "alt=sse", req.Query)
	req, _ = up.LastRequest("/v1beta/models/gemini-2.0-flash:generateContent")
	require.Equal(t, "be brief", gjsonGet(up.Requests()[0].Body, "systemInstruction.parts.0.text"))
	require.Equal(t, "2", gjsonGet(req.Body, "generationConfig.maxOutputTokens"))

	createModel(t, p.A, "gem-bad", map[string]any{"model": "gemini/gemini-2.0-flash", "api_base": up.URL, "api_key": "wrong-key-0000", "max_retries": 0})
	st, b := p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "gem-bad", "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, string(b), "API key not valid")
}

// Vertex AI, Gemini and Claude models: the access token comes from the fake's token endpoint
// named in the service-account JSON (a JWT assertion signed with the account's key), created
// on A, used on B at once.
func TestVertexProvider(t *testing.T) {
	t.Parallel()
	vx := fakeupstream.StartVertex(t, "proj-1")
	p := StartPair(t, GatewayOpts{})
	sa := vx.ServiceAccountJSON()
	createModel(t, p.A, "vgem", map[string]any{"model": "vertex_ai/gemini-2.5-pro", "api_base": vx.URL, "vertex_location": "europe-west4", "vertex_credentials": sa})
	exerciseModel(t, p.B, "vgem", fakeReply)
	checkLengthStop(t, p.B, "vgem")
	_, ok := vx.LastRequest("/v1/projects/proj-1/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent")
	require.True(t, ok, "%+v", vx.Requests())
	issued := vx.TokensIssued()
	require.Positive(t, issued)
	require.LessOrEqual(t, issued, 2, "one token per replica, cached across calls")

	createModel(t, p.A, "vclaude", map[string]any{"model": "vertex_ai/claude-sonnet-4@20250514", "api_base": vx.URL, "vertex_project": "proj-1", "vertex_credentials": sa})
	exerciseModel(t, p.B, "vclaude", fakeReply)
	_, ok = vx.LastRequest("/v1/projects/proj-1/locations/us-central1/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict")
	require.True(t, ok)

	// Credentials for another project's key: the fake refuses the project.
	createModel(t, p.A, "vother", map[string]any{"model": "vertex_ai/gemini-2.5-pro", "api_base": vx.URL, "vertex_project": "proj-2", "vertex_credentials": sa, "max_retries": 0})
	st, b := p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "vother", "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	require.Equal(t, 403, st, "%s", b)
	require.Contains(t, string(b), "Permission denied on resource project proj-2")

	// The secret never shows in /model/info.
	st, b = p.B.Do(t, "GET", "/model/info", nil)
	require.Equal(t, 200, st)
	require.NotContains(t, string(b), "PRIVATE KEY")
}

// Amazon Bedrock Converse and ConverseStream: the fake verifies each SigV4 signature by
// signing the received request again with the AWS SDK signer and its own credentials; created
// on A, used on B at once.
func TestBedrockProvider(t *testing.T) {
	t.Parallel()
	creds := fakeupstream.Bedrock{Region: "eu-central-1", AccessKeyID: "AKIAFAKEGATEWAY01", SecretAccessKey: "fake/secret+key/abcdef0123456789", SessionToken: "fake-session-token-42"}
	up := fakeupstream.StartBedrock(t, creds)
	// AWS_REGION_NAME is read only when a region-less model is called (LiteLLM's order)
	p := StartPair(t, GatewayOpts{Env: []string{"AWS_REGION=", "AWS_DEFAULT_REGION=", "AWS_REGION_NAME=" + creds.Region}})
	params := map[string]any{"model": "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0", "api_base": up.URL,
		"aws_region_name": creds.Region, "aws_access_key_id": creds.AccessKeyID, "aws_secret_access_key": creds.SecretAccessKey, "aws_session_token": creds.SessionToken}
	createModel(t, p.A, "brock", params)
	exerciseModel(t, p.B, "brock", fakeReply)
	checkLengthStop(t, p.B, "brock")
	req, ok := up.LastRequest("/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse-stream")
	require.True(t, ok, "%+v", up.Requests())
	require.True(t, strings.HasPrefix(req.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIAFAKEGATEWAY01/"), req.Header.Get("Authorization"))
	require.Equal(t, creds.SessionToken, req.Header.Get("X-Amz-Security-Token"))

	// A wrong secret: the signature does not verify, and the secret is not in the answer.
	params["aws_secret_access_key"] = "wrong/secret/key/0000000000"
	params["max_retries"] = 0
	createModel(t, p.A, "brock-bad", params)
	st, b := p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "brock-bad", "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	require.Equal(t, 403, st, "%s", b)
	require.Contains(t, string(b), "The request signature we calculated does not match")
	st, b = p.B.Do(t, "GET", "/model/info", nil)
	require.Equal(t, 200, st)
	require.NotContains(t, string(b), creds.SecretAccessKey)

	// Issue 19 item 13: a model without a region loads (LiteLLM resolves it at call time):
	// the call is signed for the region AWS_REGION_NAME names (the fake verifies the scope)
	params = map[string]any{"model": "bedrock/anthropic.claude-3-haiku-20240307-v1:0", "api_base": up.URL,
		"aws_access_key_id": creds.AccessKeyID, "aws_secret_access_key": creds.SecretAccessKey, "aws_session_token": creds.SessionToken}
	createModel(t, p.A, "brock-noregion", params)
	Eventually(t, "b calls brock-noregion", func() bool {
		st, _ := p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "brock-noregion", "messages": []any{map[string]any{"role": "user", "content": "x"}}})
		return st == 200
	})
}
