package fakeupstream

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// The OpenAI routes beyond chat, responses and embeddings: legacy completions (streamed like
// chat), images, moderations and audio (https://platform.openai.com/docs/api-reference).

// textOf joins a string, or the strings (and "text" members) of an array, with "\n".
func textOf(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	var out []string
	v.ForEach(func(_, x gjson.Result) bool {
		if x.Type == gjson.String {
			out = append(out, x.Str)
		} else if t := x.Get("text"); t.Type == gjson.String {
			out = append(out, t.Str)
		}
		return true
	})
	return strings.Join(out, "\n")
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, in ReplyInput, n int64) {
	id := fmt.Sprintf("cmpl-fake%d", n)
	text := s.cfg.reply(in)
	pt, ct := tokens(in.Text), tokens(text)
	usage := map[string]any{"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
	chunk := func(text string, finish any) map[string]any {
		return map[string]any{"id": id, "object": "text_completion", "created": Created, "model": in.Model,
			"choices": []any{map[string]any{"text": text, "index": 0, "logprobs": nil, "finish_reason": finish}}}
	}
	if !in.Stream {
		c := chunk(text, "stop")
		c["usage"] = usage
		writeJSON(w, http.StatusOK, c)
		return
	}
	e := s.startSSE(w, r)
	for _, part := range split(text, s.cfg.chunks) {
		if !e.frame("", chunk(part, nil)) {
			return
		}
	}
	last := chunk("", "stop")
	if gjson.GetBytes(in.Body, "stream_options.include_usage").Bool() {
		last["usage"] = usage
	}
	if !e.frame("", last) {
		return
	}
	e.frame("", "[DONE]")
}

// images answers with one image per n (default 1): b64_json when response_format says so, else
// a URL; revised_prompt carries the reply text.
func (s *Server) images(w http.ResponseWriter, in ReplyInput) {
	if in.Text == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "prompt: Field required")
		return
	}
	count := max(int(gjson.GetBytes(in.Body, "n").Int()), 1)
	data := make([]any, 0, count)
	for i := range count {
		img := map[string]any{"revised_prompt": s.cfg.reply(in)}
		if gjson.GetBytes(in.Body, "response_format").Str == "b64_json" {
			img["b64_json"] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("fake image %d of %q", i, in.Text)))
		} else {
			img["url"] = fmt.Sprintf("https://images.fake.invalid/%d.png", i)
		}
		data = append(data, img)
	}
	writeJSON(w, http.StatusOK, map[string]any{"created": Created, "data": data})
}

// moderations flags an input containing "flag-me".
func (s *Server) moderations(w http.ResponseWriter, in ReplyInput, n int64) {
	flagged := strings.Contains(in.Text, "flag-me")
	writeJSON(w, http.StatusOK, map[string]any{"id": fmt.Sprintf("modr-fake%d", n), "model": in.Model,
		"results": []any{map[string]any{"flagged": flagged,
			"categories":      map[string]any{"violence": flagged, "harassment": false},
			"category_scores": map[string]any{"violence": map[bool]float64{true: 0.99, false: 0.01}[flagged], "harassment": 0.0}}}})
}

// speech answers with audio/mpeg bytes: "FAKEAUDIO:" + the input.
func (s *Server) speech(w http.ResponseWriter, in ReplyInput) {
	if in.Text == "" || gjson.GetBytes(in.Body, "voice").Str == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "input and voice are required")
		return
	}
	w.Header().Set("Content-Type", "audio/mpeg")
	_, _ = w.Write([]byte("FAKEAUDIO:" + in.Text))
}

// transcriptions reads a multipart/form-data body with "file" and "model" and answers
// {"text": "transcript of <file name> by <model>: <file bytes>"} (response_format json, the
// default), with segments and words (verbose_json), or that text as text/plain (text, srt,
// vtt: the text as one cue).
func (s *Server) transcriptions(w http.ResponseWriter, r *http.Request, body []byte) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Content-Type must be multipart/form-data with a boundary")
		return
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var model, name, format string
	var file []byte
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "malformed multipart body: "+err.Error())
			return
		}
		v, _ := io.ReadAll(p)
		switch p.FormName() {
		case "model":
			model = string(v)
		case "file":
			name, file = p.FileName(), v
		case "response_format":
			format = string(v)
		}
	}
	if model == "" || file == nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "model and file are required")
		return
	}
	text := fmt.Sprintf("transcript of %s by %s: %s", name, model, file)
	switch format {
	case "text", "srt", "vtt":
		out := text + "\n"
		if format == "srt" {
			out = "1\n00:00:00,000 --> 00:00:01,000\n" + out
		} else if format == "vtt" {
			out = "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n" + out
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, out)
		return
	case "verbose_json":
		words := []any{}
		for i, wd := range strings.Fields(text) {
			words = append(words, map[string]any{"word": wd, "start": float64(i) * 0.5, "end": float64(i)*0.5 + 0.4})
		}
		writeJSON(w, http.StatusOK, map[string]any{"task": "transcribe", "language": "english", "duration": 1.0, "text": text,
			"segments": []any{map[string]any{"id": 0, "seek": 0, "start": 0.0, "end": 1.0, "text": text}}, "words": words,
			"usage": map[string]any{"type": "duration", "seconds": 1}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"text": text, "usage": map[string]any{"type": "tokens", "input_tokens": len(file), "output_tokens": tokens(text), "total_tokens": len(file) + tokens(text)}})
}
