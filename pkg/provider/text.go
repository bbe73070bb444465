package provider

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// MapRequestText rewrites every text a client sent in a request of format in through fn and
// returns the new body; the body itself is returned when fn changed nothing. The texts are:
//
//	chat:       messages[].content (string) and its parts of type "text" (.text)
//	responses:  instructions, input (string), input[].content (string) and its input_text /
//	            output_text parts, input[].output of function_call_output items (string)
//	messages:   system (string, or blocks' .text), messages[].content (string) and its text
//	            blocks, tool_result blocks' content (string or text blocks)
//	embeddings, moderations, speech: input (string, the strings of an array, or the
//	            "text" of moderation input objects)
//	completions, images: prompt (string or the strings of an array)
//	transcriptions: none (the body is audio; the body is returned as is)
//
// Messages of every role are covered. Only the string values change; everything else stays
// byte for byte. An error from fn is returned as is; an invalid body is a 400 *UpstreamError.
// Used by pre_call guardrails to mask what the upstream receives.
func MapRequestText(in Format, body []byte, fn func(string) (string, error)) ([]byte, error) {
	if in.Multipart() {
		return body, nil // audio in; the transcription comes back as text
	}
	if !gjson.ValidBytes(body) {
		return nil, badRequest("request body is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	var edits []edit
	var ferr error
	visit := func(v gjson.Result) {
		if ferr != nil || v.Type != gjson.String {
			return
		}
		out, err := fn(v.Str)
		if err != nil {
			ferr = err
			return
		}
		if out != v.Str {
			edits = append(edits, edit{start: v.Index, end: v.Index + len(v.Raw), text: out})
		}
	}
	// parts visits a string, or the text of parts whose type is one of types.
	var parts func(c gjson.Result, types ...string)
	parts = func(c gjson.Result, types ...string) {
		if c.Type == gjson.String {
			visit(c)
			return
		}
		c.ForEach(func(_, p gjson.Result) bool {
			t := p.Get("type").Str
			for _, want := range types {
				if t == want {
					visit(p.Get("text"))
					break
				}
			}
			if t == "tool_result" {
				parts(p.Get("content"), "text")
			}
			return ferr == nil
		})
	}
	switch in {
	case FormatChat:
		root.Get("messages").ForEach(func(_, m gjson.Result) bool {
			parts(m.Get("content"), "text")
			return ferr == nil
		})
	case FormatResponses:
		visit(root.Get("instructions"))
		input := root.Get("input")
		if input.Type == gjson.String {
			visit(input)
			break
		}
		input.ForEach(func(_, it gjson.Result) bool {
			if it.Get("type").Str == "function_call_output" {
				visit(it.Get("output"))
			} else {
				parts(it.Get("content"), "input_text", "output_text")
			}
			return ferr == nil
		})
	case FormatMessages:
		parts(root.Get("system"), "text")
		root.Get("messages").ForEach(func(_, m gjson.Result) bool {
			parts(m.Get("content"), "text")
			return ferr == nil
		})
	case FormatEmbeddings, FormatModerations, FormatSpeech, FormatCompletions, FormatImages:
		field := "input"
		if in == FormatCompletions || in == FormatImages {
			field = "prompt"
		}
		input := root.Get(field)
		if input.Type == gjson.String {
			visit(input)
			break
		}
		input.ForEach(func(_, v gjson.Result) bool {
			if v.IsObject() { // moderations: [{"type": "text", "text": …}, {"type": "image_url", …}]
				visit(v.Get("text"))
			} else {
				visit(v)
			}
			return ferr == nil
		})
	}
	if ferr != nil {
		return nil, ferr
	}
	return applyEdits(body, edits), nil
}

// RequestText returns the text of the last user message of a request in format in (string
// content, or its text parts joined with "\n"); for responses a string input, for embeddings
// the inputs joined with "\n". "" when there is none.
func RequestText(in Format, body []byte) string {
	root := gjson.ParseBytes(body)
	join := func(c gjson.Result) string {
		if c.Type == gjson.String {
			return c.Str
		}
		var texts []string
		c.ForEach(func(_, p gjson.Result) bool {
			switch p.Get("type").Str {
			case "text", "input_text":
				texts = append(texts, p.Get("text").Str)
			}
			return true
		})
		return strings.Join(texts, "\n")
	}
	lastUser := func(arr []gjson.Result) string {
		for i := len(arr) - 1; i >= 0; i-- {
			if arr[i].Get("role").Str == "user" {
				return join(arr[i].Get("content"))
			}
		}
		return ""
	}
	switch in {
	case FormatChat, FormatMessages:
		return lastUser(root.Get("messages").Array())
	case FormatResponses:
		input := root.Get("input")
		if input.Type == gjson.String {
			return input.Str
		}
		return lastUser(input.Array())
	case FormatEmbeddings:
		input := root.Get("input")
		if input.Type == gjson.String {
			return input.Str
		}
		var texts []string
		input.ForEach(func(_, v gjson.Result) bool {
			if v.Type == gjson.String {
				texts = append(texts, v.Str)
			}
			return true
		})
		return strings.Join(texts, "\n")
	}
	return ""
}

// ChatRequest builds a minimal OpenAI chat completion request:
// {"model": model, "messages": [{"role": "user", "content": text}]}.
func ChatRequest(model, text string) []byte {
	b := make([]byte, 0, 64+len(model)+len(text))
	b = append(b, `{"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"messages":[{"role":"user","content":`...)
	b = appendJSONString(b, text)
	return append(b, "}]}"...)
}

// ErrorEvent returns one SSE frame in format f telling a streaming client that the call failed
// after the stream had started (the HTTP status is already 200 then):
//
//	chat, embeddings: data: {"error": {"message", "type", "param": null, "code": "<status>"}}
//	                  (the envelope of API.md; the OpenAI SDKs raise on a data frame with "error")
//	responses:        event: error / data: {"type": "error", "code": "<status>", "message", "param": null, "sequence_number": 0}
//	                  (the Responses API "error" stream event)
//	messages:         event: error / data: {"type": "error", "error": {"type", "message"}}
//	                  (Anthropic's mid-stream error event, e.g. overloaded_error)
func ErrorEvent(f Format, status int, message string) []byte {
	return appendErrorEvent(nil, f, status, message)
}

func appendErrorEvent(b []byte, f Format, status int, message string) []byte {
	switch f {
	case FormatMessages:
		b = appendEvent(b, "error")
		b = append(b, `{"type":"error","error":{"type":`...)
		b = appendJSONString(b, anthropicErrorType(status))
		b = append(b, `,"message":`...)
		b = appendJSONString(b, message)
		return append(b, "}}\n\n"...)
	case FormatResponses:
		b = appendEvent(b, "error")
		b = append(b, `{"type":"error","code":`...)
		b = appendJSONString(b, strconv.Itoa(status))
		b = append(b, `,"message":`...)
		b = appendJSONString(b, message)
		return append(b, `,"param":null,"sequence_number":0}`+"\n\n"...)
	}
	b = append(b, `data: {"error":{"message":`...)
	b = appendJSONString(b, message)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, openAIErrorType(status))
	b = append(b, `,"param":null,"code":`...)
	b = appendJSONString(b, strconv.Itoa(status))
	return append(b, "}}\n\n"...)
}

// openAIErrorType is the error "type" used for a status in OpenAI-style envelopes.
func openAIErrorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 408 || status == 504:
		return "timeout_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// anthropicErrorType is Anthropic's error type for a status (https://docs.anthropic.com/en/api/errors).
func anthropicErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
