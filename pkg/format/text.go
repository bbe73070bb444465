package format

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

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
	b = AppendJSONString(b, model)
	b = append(b, `,"messages":[{"role":"user","content":`...)
	b = AppendJSONString(b, text)
	return append(b, "}]}"...)
}

// ErrorEvent returns one SSE frame in format f telling a streaming client that the call failed
// after the stream had started (the HTTP status is already 200 then), with the error type of
// the status ([ErrorType], or [AnthropicErrorType] for messages):
//
//	chat, embeddings: data: {"error": {"message", "type", "param": null, "code": "<status>"}}
//	                  (the envelope of API.md; the OpenAI SDKs raise on a data frame with "error")
//	responses:        event: error / data: {"type": "error", "code": "<status>", "message", "param": null, "sequence_number": 0}
//	                  (the Responses API "error" stream event)
//	messages:         event: error / data: {"type": "error", "error": {"type", "message"}}
//	                  (Anthropic's mid-stream error event, e.g. overloaded_error)
func ErrorEvent(f Format, status int, message string) []byte {
	return AppendErrorEvent(nil, f, status, "", message)
}

// ErrorEventOf is [ErrorEvent] with the error type given: typ is the type the same error gets
// in a plain (non-stream) answer, so that one failure has one type before and during a stream
// ("" = the status' type). In the messages format an OpenAI type becomes Anthropic's
// ([AnthropicType]).
func ErrorEventOf(f Format, status int, typ, message string) []byte {
	return AppendErrorEvent(nil, f, status, typ, message)
}

func AppendErrorEvent(b []byte, f Format, status int, typ, message string) []byte {
	switch f {
	case FormatMessages:
		b = AppendEvent(b, "error")
		b = append(b, `{"type":"error","error":{"type":`...)
		b = AppendJSONString(b, AnthropicType(status, typ))
		b = append(b, `,"message":`...)
		b = AppendJSONString(b, message)
		return append(b, "}}\n\n"...)
	case FormatResponses:
		b = AppendEvent(b, "error")
		b = append(b, `{"type":"error","code":`...)
		b = AppendJSONString(b, strconv.Itoa(status))
		b = append(b, `,"message":`...)
		b = AppendJSONString(b, message)
		return append(b, `,"param":null,"sequence_number":0}`+"\n\n"...)
	}
	if typ == "" {
		typ = ErrorType(status)
	}
	b = append(b, `data: {"error":{"message":`...)
	b = AppendJSONString(b, message)
	b = append(b, `,"type":`...)
	b = AppendJSONString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	b = AppendJSONString(b, strconv.Itoa(status))
	return append(b, "}}\n\n"...)
}

// ErrorType is the one table of OpenAI error types by HTTP status, used for every
// OpenAI-style error envelope this gateway writes, before a stream (the HTTP error handler)
// and during one (ErrorEvent), so that one failure has one type: 400 invalid_request_error,
// 401 authentication_error, 403 permission_error, 404 not_found_error, 408 and 504
// timeout_error, 409 conflict_error, 413 request_too_large, 429 rate_limit_error, 503
// service_unavailable, other 5xx internal_server_error, other 4xx invalid_request_error.
// (OpenAI's names, as its SDKs' error classes: AuthenticationError, PermissionDeniedError,
// NotFoundError, ConflictError, RateLimitError, InternalServerError.)
func ErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 408, 504:
		return "timeout_error"
	case 409:
		return "conflict_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503:
		return "service_unavailable"
	}
	if status >= 500 {
		return "internal_server_error"
	}
	return "invalid_request_error"
}

// anthropicTypes are the error types Anthropic documents (https://docs.anthropic.com/en/api/errors).
var anthropicTypes = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "billing_error": true,
	"permission_error": true, "not_found_error": true, "request_too_large": true,
	"rate_limit_error": true, "api_error": true, "timeout_error": true, "overloaded_error": true,
}

// AnthropicType is the error type of an Anthropic envelope: typ when it already is one of
// Anthropic's (e.g. an Anthropic upstream's, passed through), else [AnthropicErrorType].
func AnthropicType(status int, typ string) string {
	if anthropicTypes[typ] {
		return typ
	}
	return AnthropicErrorType(status)
}

// AnthropicErrorType is Anthropic's error type for a status (https://docs.anthropic.com/en/api/errors):
// 400 invalid_request_error, 401 authentication_error, 402 billing_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 529
// overloaded_error, 504 timeout_error, other 4xx invalid_request_error, anything else
// api_error.
func AnthropicErrorType(status int) string {
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
	if status >= 400 && status < 500 && status != 409 && status != 422 {
		return "invalid_request_error"
	}
	return "api_error"
}

func AppendEvent(b []byte, event string) []byte {
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	return b
}
