package provider

import (
	"lockstep/pkg/format"

	"bytes"
	"context"
	"errors"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestAzureDeployment(t *testing.T) {
	t.Parallel()
	d, err := NewDeployment("id", "grp", []byte(`{"model":"azure/my dep","api_base":"https://r.openai.azure.com/","api_key":"azure-key-123456","api_version":"2025-01-01-preview"}`))
	require.NoError(t, err)
	require.Equal(t, "https://r.openai.azure.com/openai/deployments/my%20dep/chat/completions?api-version=2025-01-01-preview", d.urls[format.FormatChat])
	require.Equal(t, "https://r.openai.azure.com/openai/deployments/my%20dep/audio/transcriptions?api-version=2025-01-01-preview", d.urls[format.FormatTranscriptions])
	require.Equal(t, "azure-key-123456", d.header.Get("api-key"))
	require.Empty(t, d.header.Get("Authorization"))
	require.False(t, d.Supports(format.FormatModerations))
	require.True(t, d.Supports(format.FormatResponses))
	up, pass, err := plan(d, format.FormatResponses)
	require.NoError(t, err)
	require.True(t, pass, "Azure serves the Responses API itself")
	require.Equal(t, format.FormatResponses, up)
	require.Equal(t, "https://r.openai.azure.com/openai/responses?api-version=2025-01-01-preview", d.urls[format.FormatResponses])
	out, _, err := upstreamBody(d, format.FormatResponses, up, pass, false, []byte(`{"model":"grp","input":"hi"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"my dep","input":"hi"}`, string(out), "the deployment goes in the body")
	_, pass, err = plan(d, format.FormatMessages)
	require.NoError(t, err)
	require.False(t, pass, "messages are translated to chat")
	for version, want := range map[string]string{
		"preview": "https://r.openai.azure.com/openai/v1/responses?api-version=preview",
		"latest":  "https://r.openai.azure.com/openai/v1/responses?api-version=latest",
		"v1":      "https://r.openai.azure.com/openai/v1/responses",
	} {
		dv, err := NewDeployment("id", "grp", []byte(`{"model":"azure/dep","api_base":"https://r.openai.azure.com","api_key":"k","api_version":"`+version+`"}`))
		require.NoError(t, err)
		require.Equal(t, want, dv.urls[format.FormatResponses], version)
	}

	d, err = NewDeployment("id", "grp", []byte(`{"model":"azure/dep","api_base":"https://r.openai.azure.com/openai","azure_ad_token":"Bearer eyJ0eXAiOiJKV1Qi"}`))
	require.NoError(t, err)
	require.Equal(t, "https://r.openai.azure.com/openai/deployments/dep/chat/completions?api-version="+DefaultAzureAPIVersion, d.urls[format.FormatChat])
	require.Equal(t, "https://r.openai.azure.com/openai/v1/responses?api-version=preview", d.urls[format.FormatResponses], "no api_version: LiteLLM's default for responses")
	require.Equal(t, "Bearer eyJ0eXAiOiJKV1Qi", d.header.Get("Authorization"))
	require.Equal(t, "x ey****V1Qi", d.Redact("x eyJ0eXAiOiJKV1Qi"))

	_, err = NewDeployment("id", "grp", []byte(`{"model":"azure/dep","api_base":"https://r.openai.azure.com"}`))
	require.ErrorContains(t, err, "litellm_params.api_key (or azure_ad_token, or AZURE_API_KEY) is required for provider \"azure\"")
	_, err = NewDeployment("id", "grp", []byte(`{"model":"azure/dep","api_key":"k"}`))
	require.ErrorContains(t, err, `litellm_params.api_base is required for provider "azure"`)
}

func TestUnsupportedRouteNamesProvider(t *testing.T) {
	t.Parallel()
	d, err := NewDeployment("id", "grp", []byte(`{"model":"anthropic/claude-x","api_key":"k"}`))
	require.NoError(t, err)
	_, err = NewClient().Do(context.Background(), d, format.FormatImages, []byte(`{"model":"grp","prompt":"x"}`))
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 400, ue.Status)
	require.Equal(t, "/images/generations not supported by provider anthropic", ue.Message)
}

func multipartBody(t *testing.T, fields map[string]string, file string) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		require.NoError(t, mw.WriteField(k, v))
	}
	fw, err := mw.CreateFormFile("file", "a.wav")
	require.NoError(t, err)
	_, _ = io.WriteString(fw, file)
	require.NoError(t, mw.Close())
	return buf.Bytes(), mw.FormDataContentType()
}

func TestMultipartModel(t *testing.T) {
	t.Parallel()
	body, ct := multipartBody(t, map[string]string{"model": "grp", "language": "en"}, "\x00binary\r\n--not-a-boundary")
	m, err := format.MultipartModel(body)
	require.NoError(t, err)
	require.Equal(t, "grp", m)
	require.Equal(t, ct, format.MultipartContentType(body))

	out, err := format.RewriteMultipartModel(body, "whisper-1")
	require.NoError(t, err)
	m, err = format.MultipartModel(out)
	require.NoError(t, err)
	require.Equal(t, "whisper-1", m)
	r := multipart.NewReader(bytes.NewReader(out), format.MultipartBoundary(out))
	form, err := r.ReadForm(1 << 20)
	require.NoError(t, err)
	require.Equal(t, []string{"en"}, form.Value["language"])
	f, err := form.File["file"][0].Open()
	require.NoError(t, err)
	data, _ := io.ReadAll(f)
	require.Equal(t, "\x00binary\r\n--not-a-boundary", string(data))

	_, err = format.MultipartModel([]byte(`{"model":"x"}`))
	require.ErrorContains(t, err, "not multipart/form-data")
}

func TestMapRequestTextPassthroughFormats(t *testing.T) {
	t.Parallel()
	up := func(t format.Text) (string, error) { return strings.ToUpper(t.Value), nil }
	for _, tc := range []struct {
		f        format.Format
		in, want string
	}{
		{format.FormatCompletions, `{"prompt":["a","b"],"model":"m"}`, `{"prompt":["A","B"],"model":"m"}`},
		{format.FormatImages, `{"prompt":"fox"}`, `{"prompt":"FOX"}`},
		{format.FormatModerations, `{"input":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"u"}}]}`, `{"input":[{"type":"text","text":"X"},{"type":"image_url","image_url":{"url":"u"}}]}`},
		{format.FormatSpeech, `{"input":"say","voice":"alloy"}`, `{"input":"SAY","voice":"alloy"}`},
		{format.FormatSpeech, `{"input":"say","voice":"alloy","instructions":"calm"}`, `{"input":"SAY","voice":"alloy","instructions":"CALM"}`},
		{format.FormatCompletions, `{"prompt":"a","suffix":"end"}`, `{"prompt":"A","suffix":"END"}`},
	} {
		out, err := format.MapRequestText(tc.f, []byte(tc.in), up)
		require.NoError(t, err, tc.f)
		require.Equal(t, tc.want, string(out), tc.f)
	}
	body, _ := multipartBody(t, map[string]string{"model": "m"}, "audio")
	out, err := format.MapRequestText(format.FormatTranscriptions, body, up)
	require.NoError(t, err)
	require.Equal(t, body, out)
}

// The transcription prompt is a text location (pre_call MASK/BLOCK): the multipart body is
// rebuilt with that field edited, the audio and every other field byte for byte.
func TestMapRequestTextMultipartPrompt(t *testing.T) {
	t.Parallel()
	audio := "\x00pcm mail a@b.example\r\n--x"
	body, _ := multipartBody(t, map[string]string{"model": "m", "prompt": "names: a@b.example", "language": "en"}, audio)
	var seen []string
	out, err := format.MapRequestText(format.FormatTranscriptions, body, func(t format.Text) (string, error) {
		seen = append(seen, t.Value)
		return strings.ReplaceAll(t.Value, "a@b.example", "[EMAIL]"), nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"names: a@b.example"}, seen, "only the prompt is text; the audio is not")
	form, err := multipart.NewReader(bytes.NewReader(out), format.MultipartBoundary(out)).ReadForm(1 << 20)
	require.NoError(t, err)
	require.Equal(t, []string{"names: [EMAIL]"}, form.Value["prompt"])
	require.Equal(t, []string{"m"}, form.Value["model"])
	require.Equal(t, []string{"en"}, form.Value["language"])
	f, err := form.File["file"][0].Open()
	require.NoError(t, err)
	data, _ := io.ReadAll(f)
	require.Equal(t, audio, string(data))

	blocked := errors.New("blocked")
	_, err = format.MapRequestText(format.FormatTranscriptions, body, func(format.Text) (string, error) { return "", blocked })
	require.ErrorIs(t, err, blocked)
}

func TestMultipartGuardrails(t *testing.T) {
	t.Parallel()
	body, _ := multipartBody(t, map[string]string{"model": "m", "guardrails": `["g1","g2"]`, "guardrails[]": "g3, g4"}, "audio")
	names, found, out, err := format.MultipartGuardrails(body)
	require.NoError(t, err)
	require.True(t, found)
	require.ElementsMatch(t, []string{"g1", "g2", "g3", "g4"}, names)
	form, err := multipart.NewReader(bytes.NewReader(out), format.MultipartBoundary(out)).ReadForm(1 << 20)
	require.NoError(t, err)
	require.NotContains(t, form.Value, "guardrails")
	require.NotContains(t, form.Value, "guardrails[]")
	require.Equal(t, []string{"m"}, form.Value["model"])

	plain, _ := multipartBody(t, map[string]string{"model": "m"}, "audio")
	names, found, out, err = format.MultipartGuardrails(plain)
	require.NoError(t, err)
	require.False(t, found)
	require.Empty(t, names)
	require.Equal(t, plain, out)

	bad, _ := multipartBody(t, map[string]string{"guardrails": `["g1",`}, "audio")
	_, _, _, err = format.MultipartGuardrails(bad)
	require.ErrorContains(t, err, "guardrails must be an array of guardrail names")
}

// A transcription answered as text, srt or vtt (not JSON) is one text for post_call; JSON
// answers have text, segments[].text and words[].word.
func TestMapResponseTextTranscriptions(t *testing.T) {
	t.Parallel()
	mask := func(t format.Text) (string, error) { return strings.ReplaceAll(t.Value, "a@b.example", "[EMAIL]"), nil }
	for in, want := range map[string]string{
		"hello a@b.example\n": "hello [EMAIL]\n",
		"1\n00:00:00,000 --> 00:00:01,000\nmail a@b.example\n": "1\n00:00:00,000 --> 00:00:01,000\nmail [EMAIL]\n",
		`"a@b.example"`: `"[EMAIL]"`,
		`{"text":"a@b.example","segments":[{"id":0,"text":"a@b.example"}],"words":[{"word":"a@b.example","start":0}]}`: `{"text":"[EMAIL]","segments":[{"id":0,"text":"[EMAIL]"}],"words":[{"word":"[EMAIL]","start":0}]}`,
	} {
		out, err := format.MapResponseText(format.FormatTranscriptions, []byte(in), mask)
		require.NoError(t, err)
		require.Equal(t, want, string(out))
	}
	require.Equal(t, "plain text", AnswerText(format.FormatTranscriptions, []byte("plain text")))
}

func TestMockCompletions(t *testing.T) {
	t.Parallel()
	d, err := NewDeployment("id", "grp", []byte(`{"model":"openai/x","mock_response":"hello there"}`))
	require.NoError(t, err)
	res, err := NewClient().Do(context.Background(), d, format.FormatCompletions, []byte(`{"model":"grp","prompt":"x"}`))
	require.NoError(t, err)
	require.Equal(t, "text_completion", gjson.GetBytes(res.Body, "object").Str)
	require.Equal(t, "hello there", gjson.GetBytes(res.Body, "choices.0.text").Str)
	require.Equal(t, format.Usage{PromptTokens: 10, CompletionTokens: 20}, res.Usage)
	st, err := NewClient().Stream(context.Background(), d, format.FormatCompletions, []byte(`{"model":"grp","prompt":"x","stream":true}`))
	require.NoError(t, err)
	var all strings.Builder
	for {
		ev, err := st.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		all.Write(ev.Data)
	}
	require.Contains(t, all.String(), `"object":"text_completion"`)
	require.True(t, strings.HasSuffix(all.String(), "data: [DONE]\n\n"))
	require.False(t, d.Supports(format.FormatImages))
}
