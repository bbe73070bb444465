package format

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

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
	m, err := MultipartModel(body)
	require.NoError(t, err)
	require.Equal(t, "grp", m)
	require.Equal(t, ct, MultipartContentType(body))

	out, err := RewriteMultipartModel(body, "whisper-1")
	require.NoError(t, err)
	m, err = MultipartModel(out)
	require.NoError(t, err)
	require.Equal(t, "whisper-1", m)
	r := multipart.NewReader(bytes.NewReader(out), MultipartBoundary(out))
	form, err := r.ReadForm(1 << 20)
	require.NoError(t, err)
	require.Equal(t, []string{"en"}, form.Value["language"])
	f, err := form.File["file"][0].Open()
	require.NoError(t, err)
	data, _ := io.ReadAll(f)
	require.Equal(t, "\x00binary\r\n--not-a-boundary", string(data))

	_, err = MultipartModel([]byte(`{"model":"x"}`))
	require.ErrorContains(t, err, "not multipart/form-data")
}

func TestMapRequestTextPassthroughFormats(t *testing.T) {
	t.Parallel()
	up := func(t Text) (string, error) { return strings.ToUpper(t.Value), nil }
	for _, tc := range []struct {
		f        Format
		in, want string
	}{
		{FormatCompletions, `{"prompt":["a","b"],"model":"m"}`, `{"prompt":["A","B"],"model":"m"}`},
		{FormatImages, `{"prompt":"fox"}`, `{"prompt":"FOX"}`},
		{FormatModerations, `{"input":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"u"}}]}`, `{"input":[{"type":"text","text":"X"},{"type":"image_url","image_url":{"url":"u"}}]}`},
		{FormatSpeech, `{"input":"say","voice":"alloy"}`, `{"input":"SAY","voice":"alloy"}`},
		{FormatSpeech, `{"input":"say","voice":"alloy","instructions":"calm"}`, `{"input":"SAY","voice":"alloy","instructions":"CALM"}`},
		{FormatCompletions, `{"prompt":"a","suffix":"end"}`, `{"prompt":"A","suffix":"END"}`},
	} {
		out, err := MapRequestText(tc.f, []byte(tc.in), up)
		require.NoError(t, err, tc.f)
		require.Equal(t, tc.want, string(out), tc.f)
	}
	body, _ := multipartBody(t, map[string]string{"model": "m"}, "audio")
	out, err := MapRequestText(FormatTranscriptions, body, up)
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
	out, err := MapRequestText(FormatTranscriptions, body, func(t Text) (string, error) {
		seen = append(seen, t.Value)
		return strings.ReplaceAll(t.Value, "a@b.example", "[EMAIL]"), nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"names: a@b.example"}, seen, "only the prompt is text; the audio is not")
	form, err := multipart.NewReader(bytes.NewReader(out), MultipartBoundary(out)).ReadForm(1 << 20)
	require.NoError(t, err)
	require.Equal(t, []string{"names: [EMAIL]"}, form.Value["prompt"])
	require.Equal(t, []string{"m"}, form.Value["model"])
	require.Equal(t, []string{"en"}, form.Value["language"])
	f, err := form.File["file"][0].Open()
	require.NoError(t, err)
	data, _ := io.ReadAll(f)
	require.Equal(t, audio, string(data))

	blocked := errors.New("blocked")
	_, err = MapRequestText(FormatTranscriptions, body, func(Text) (string, error) { return "", blocked })
	require.ErrorIs(t, err, blocked)
}

func TestMultipartGuardrails(t *testing.T) {
	t.Parallel()
	body, _ := multipartBody(t, map[string]string{"model": "m", "guardrails": `["g1","g2"]`, "guardrails[]": "g3, g4"}, "audio")
	names, found, out, err := MultipartGuardrails(body)
	require.NoError(t, err)
	require.True(t, found)
	require.ElementsMatch(t, []string{"g1", "g2", "g3", "g4"}, names)
	form, err := multipart.NewReader(bytes.NewReader(out), MultipartBoundary(out)).ReadForm(1 << 20)
	require.NoError(t, err)
	require.NotContains(t, form.Value, "guardrails")
	require.NotContains(t, form.Value, "guardrails[]")
	require.Equal(t, []string{"m"}, form.Value["model"])

	plain, _ := multipartBody(t, map[string]string{"model": "m"}, "audio")
	names, found, out, err = MultipartGuardrails(plain)
	require.NoError(t, err)
	require.False(t, found)
	require.Empty(t, names)
	require.Equal(t, plain, out)

	bad, _ := multipartBody(t, map[string]string{"guardrails": `["g1",`}, "audio")
	_, _, _, err = MultipartGuardrails(bad)
	require.ErrorContains(t, err, "guardrails must be an array of guardrail names")
}

// A transcription answered as text, srt or vtt (not JSON) is one text for post_call; JSON
// answers have text, segments[].text and words[].word.
func TestMapResponseTextTranscriptions(t *testing.T) {
	t.Parallel()
	mask := func(t Text) (string, error) { return strings.ReplaceAll(t.Value, "a@b.example", "[EMAIL]"), nil }
	for in, want := range map[string]string{
		"hello a@b.example\n": "hello [EMAIL]\n",
		"1\n00:00:00,000 --> 00:00:01,000\nmail a@b.example\n": "1\n00:00:00,000 --> 00:00:01,000\nmail [EMAIL]\n",
		`"a@b.example"`: `"[EMAIL]"`,
		`{"text":"a@b.example","segments":[{"id":0,"text":"a@b.example"}],"words":[{"word":"a@b.example","start":0}]}`: `{"text":"[EMAIL]","segments":[{"id":0,"text":"[EMAIL]"}],"words":[{"word":"[EMAIL]","start":0}]}`,
	} {
		out, err := MapResponseText(FormatTranscriptions, []byte(in), mask)
		require.NoError(t, err)
		require.Equal(t, want, string(out))
	}
	require.Equal(t, "plain text", AnswerText(FormatTranscriptions, []byte("plain text")))
}
