package provider

import "github.com/tidwall/gjson"

func usageFrom(f Format, u gjson.Result) Usage {
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

// AnswerText is the assistant text of an answer in format f: the first choice's content
// (chat), the text blocks (messages), the message items' output_text (responses); "" for
// embeddings.
func AnswerText(f Format, body []byte) string { return answerText(f, body) }
