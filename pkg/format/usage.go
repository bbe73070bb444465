package format

import (
	"github.com/tidwall/gjson"
)

func UsageFrom(f Format, u gjson.Result) Usage {
	switch f {
	case FormatResponses:
		return Usage{PromptTokens: u.Get("input_tokens").Int(), CompletionTokens: u.Get("output_tokens").Int()}
	case FormatMessages:
		return Usage{
			PromptTokens:     u.Get("input_tokens").Int() + u.Get("cache_read_input_tokens").Int() + u.Get("cache_creation_input_tokens").Int(),
			CompletionTokens: u.Get("output_tokens").Int(),
		}
	}
	return Usage{PromptTokens: u.Get("prompt_tokens").Int(), CompletionTokens: u.Get("completion_tokens").Int()}
}

// AddStreamUsage updates u from the SSE frames in data (format f) that report usage: chat's
// usage chunk (stream_options.include_usage), Anthropic's message_start and message_delta,
// Responses' response.completed / incomplete. Later reports replace earlier ones field by
// field.
func AddStreamUsage(f Format, data []byte, u *Usage) {
	for pos := 0; pos < len(data); {
		n := SSEFrameLen(data[pos:])
		frame := data[pos : pos+n]
		pos += n
		i := indexData(frame)
		if i < 0 {
			continue
		}
		j := gjson.Parse(bytesView(frame[i:]))
		var r gjson.Result
		switch f {
		case FormatChat, FormatCompletions:
			r = j.Get("usage")
		case FormatMessages:
			switch j.Get("type").Str {
			case "message_start":
				r = j.Get("message.usage")
			case "message_delta":
				r = j.Get("usage")
			}
		case FormatResponses:
			r = j.Get("response.usage")
		}
		if !r.IsObject() {
			continue
		}
		got := UsageFrom(f, r)
		if got.PromptTokens > 0 {
			u.PromptTokens = got.PromptTokens
		}
		if got.CompletionTokens > 0 {
			u.CompletionTokens = got.CompletionTokens
		}
	}
}

// indexData is the offset of the JSON value of a frame's first "data: {" line, -1 if none.
func indexData(frame []byte) int {
	for i := 0; i+6 < len(frame); {
		if (i == 0 || frame[i-1] == '\n') && string(frame[i:i+5]) == "data:" {
			k := i + 5
			for k < len(frame) && frame[k] == ' ' {
				k++
			}
			if k < len(frame) && frame[k] == '{' {
				return k
			}
			return -1
		}
		i++
	}
	return -1
}

// Usage is the token usage of one call in OpenAI's sense: PromptTokens counts every input
// token, cached ones included (Anthropic's input_tokens + cache reads + cache writes, Gemini's
// promptTokenCount, Bedrock's inputTokens, Ollama's prompt_eval_count); CompletionTokens the
// generated ones.
type Usage struct {
	PromptTokens, CompletionTokens int64
}

// answerUsage reads the token usage of a passed-through answer in format f: chat, completions
// and embeddings usage.prompt_tokens/completion_tokens, responses usage.input_tokens/
// output_tokens, messages usage.input_tokens (+ cache reads and writes)/output_tokens.
func AnswerUsage(f Format, body []byte) Usage {
	if len(body) == 0 || body[0] != '{' {
		return Usage{}
	}
	u := gjson.Get(bytesView(body), "usage")
	if !u.IsObject() {
		return Usage{}
	}
	switch f {
	case FormatMessages:
		return Usage{PromptTokens: u.Get("input_tokens").Int() + u.Get("cache_read_input_tokens").Int() + u.Get("cache_creation_input_tokens").Int(), CompletionTokens: u.Get("output_tokens").Int()}
	case FormatResponses, FormatTranscriptions:
		return Usage{PromptTokens: u.Get("input_tokens").Int(), CompletionTokens: u.Get("output_tokens").Int()}
	}
	return Usage{PromptTokens: u.Get("prompt_tokens").Int(), CompletionTokens: u.Get("completion_tokens").Int()}
}

// StreamRequested reports whether a request body asks for streaming ("stream": true).
func StreamRequested(body []byte) bool {
	return gjson.Get(bytesView(body), "stream").Type == gjson.True
}
