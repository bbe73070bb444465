package format

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// errorCode is the upstream's own error code from an error body, "" when it sent none:
// OpenAI's {"error": {"code": "context_length_exceeded" | "content_policy_violation" |
// "rate_limit_exceeded" | ...}} (a string; a number, as some OpenAI-compatible servers send,
// is kept as its decimal text). Anthropic's errors carry no code (their error.type says it).
func ErrorCode(body []byte) string {
	if len(body) == 0 || !ValidJSON(body) {
		return ""
	}
	c := gjson.GetBytes(body, "error.code")
	switch c.Type {
	case gjson.String:
		return c.Str
	case gjson.Number:
		return strconv.FormatInt(c.Int(), 10)
	}
	return ""
}
