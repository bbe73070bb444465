package format

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// stopReason is why generation ended, in neutral form.
type stopReason uint8

const (
	stopEnd      stopReason = iota // natural end
	stopLength                     // token limit
	stopTool                       // the model called tools
	stopSequence                   // a stop sequence matched
	stopFilter                     // refused / filtered
)

// chatFinish maps to OpenAI chat finish_reason.
func (s stopReason) chatFinish() string {
	switch s {
	case stopLength:
		return "length"
	case stopTool:
		return "tool_calls"
	case stopFilter:
		return "content_filter"
	}
	return "stop"
}

// anthropicStop maps to Anthropic stop_reason.
func (s stopReason) anthropicStop() string {
	switch s {
	case stopLength:
		return "max_tokens"
	case stopTool:
		return "tool_use"
	case stopSequence:
		return "stop_sequence"
	case stopFilter:
		return "refusal"
	}
	return "end_turn"
}

func stopFromChat(s string) stopReason {
	switch s {
	case "length":
		return stopLength
	case "tool_calls", "function_call":
		return stopTool
	case "content_filter":
		return stopFilter
	}
	return stopEnd
}

func stopFromAnthropic(s string) stopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return stopLength
	case "tool_use":
		return stopTool
	case "stop_sequence":
		return stopSequence
	case "refusal":
		return stopFilter
	}
	return stopEnd
}

// usage is token usage in OpenAI's sense: in counts every prompt token, cached ones included.
type usage struct {
	in, out, cacheRead, cacheWrite int64
}

func (u usage) public() Usage {
	return Usage{PromptTokens: u.in, CompletionTokens: u.out}
}

// anthropicInput is Anthropic's input_tokens: the prompt tokens not read from or written to
// the cache.
func (u usage) anthropicInput() int64 { return max(u.in-u.cacheRead-u.cacheWrite, 0) }

// block is one piece of assistant output: text, or a tool call.
type block struct {
	tool bool
	text string // text block
	id   string // tool call id
	name string // tool name
	args string // tool arguments, JSON text
	ns   string // the tool's namespace (Responses namespace tools), "" = none
	// think marks reasoning (Anthropic thinking, chat reasoning_content): text is the
	// reasoning, sig its signature ("" when the upstream gave none). Not part of text().
	think bool
	sig   string
}

// result is an assistant answer in neutral form.
type result struct {
	id, model string
	blocks    []block
	stop      stopReason
	stopSeq   string
	usage     usage
}

func (r *result) text() string {
	if len(r.blocks) == 1 && !r.blocks[0].tool && !r.blocks[0].think {
		return r.blocks[0].text
	}
	var sb strings.Builder
	for _, b := range r.blocks {
		if !b.tool && !b.think {
			sb.WriteString(b.text)
		}
	}
	return sb.String()
}

var errBadUpstreamJSON = errors.New("upstream answer is not a JSON object")

// parseChatResult reads an OpenAI chat.completion (first choice).
func parseChatResult(body []byte) (*result, error) {
	if !ValidJSON(body) {
		return nil, errBadUpstreamJSON
	}
	root := gjson.Parse(bytesView(body)) // views body: what is read from it aliases it (never modified)
	r := &result{id: root.Get("id").Str, model: root.Get("model").Str}
	choice := root.Get("choices.0")
	msg := choice.Get("message")
	if tbs := msg.Get("thinking_blocks"); tbs.IsArray() { // LiteLLM (from Anthropic): signed
		tbs.ForEach(func(_, tb gjson.Result) bool {
			if tb.Get("type").Str == "thinking" {
				r.blocks = append(r.blocks, block{think: true, text: tb.Get("thinking").Str, sig: tb.Get("signature").Str})
			}
			return true
		})
	} else if t := msg.Get("reasoning_content").Str; t != "" { // DeepSeek, vLLM
		r.blocks = append(r.blocks, block{think: true, text: t})
	}
	if t := contentText(msg.Get("content")); t != "" {
		r.blocks = append(r.blocks, block{text: t})
	} else if t := msg.Get("refusal").Str; t != "" {
		r.blocks = append(r.blocks, block{text: t})
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		r.blocks = append(r.blocks, block{tool: true, id: tc.Get("id").Str, name: tc.Get("function.name").Str, args: tc.Get("function.arguments").Str})
		return true
	})
	r.stop = stopFromChat(choice.Get("finish_reason").Str)
	u := root.Get("usage")
	r.usage = usage{in: u.Get("prompt_tokens").Int(), out: u.Get("completion_tokens").Int(), cacheRead: u.Get("prompt_tokens_details.cached_tokens").Int()}
	return r, nil
}

// parseMessagesResult reads an Anthropic Message.
func parseMessagesResult(body []byte) (*result, error) {
	if !ValidJSON(body) {
		return nil, errBadUpstreamJSON
	}
	root := gjson.Parse(bytesView(body)) // views body: what is read from it aliases it (never modified)
	r := &result{id: root.Get("id").Str, model: root.Get("model").Str}
	root.Get("content").ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").Str {
		case "text":
			r.blocks = append(r.blocks, block{text: b.Get("text").Str})
		case "tool_use":
			args := b.Get("input").Raw
			if args == "" {
				args = "{}"
			}
			r.blocks = append(r.blocks, block{tool: true, id: b.Get("id").Str, name: b.Get("name").Str, args: args})
		case "thinking":
			r.blocks = append(r.blocks, block{think: true, text: b.Get("thinking").Str, sig: b.Get("signature").Str})
		}
		return true
	})
	r.stop = stopFromAnthropic(root.Get("stop_reason").Str)
	r.stopSeq = root.Get("stop_sequence").Str
	u := root.Get("usage")
	cr, cw := u.Get("cache_read_input_tokens").Int(), u.Get("cache_creation_input_tokens").Int()
	r.usage = usage{in: u.Get("input_tokens").Int() + cr + cw, out: u.Get("output_tokens").Int(), cacheRead: cr, cacheWrite: cw}
	return r, nil
}

// contentText joins the text of an OpenAI/Anthropic content value: a string, or an array of
// parts/blocks whose type is text, input_text or output_text.
func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	if !c.IsArray() {
		return ""
	}
	var sb strings.Builder
	c.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").Str {
		case "text", "input_text", "output_text":
			sb.WriteString(p.Get("text").Str)
		}
		return true
	})
	return sb.String()
}

// ---- rendering (non-streaming) ----

// marshal encodes v without HTML escaping (the bytes go to API clients, not HTML).
func marshal(v any) []byte {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("provider: marshal: " + err.Error()) // only our own types are encoded
	}
	s := sb.String()
	return []byte(s[:len(s)-1]) // drop Encode's newline
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// rawJSON is a json.RawMessage that encodes as-is (args and schemas from upstreams/clients).
type rawJSON = json.RawMessage

func validObject(s string) rawJSON {
	if s != "" && ValidJSONString(s) && gjson.Parse(s).IsObject() {
		return rawJSON(s)
	}
	return rawJSON("{}")
}

type chatToolCallOut struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatUsageOut struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func chatUsage(u usage) chatUsageOut {
	out := chatUsageOut{PromptTokens: u.in, CompletionTokens: u.out, TotalTokens: u.in + u.out}
	out.PromptTokensDetails.CachedTokens = u.cacheRead
	return out
}

// renderChat renders an OpenAI chat.completion
// (https://platform.openai.com/docs/api-reference/chat/object).
func renderChat(r *result, created int64) []byte {
	type message struct {
		Role      string            `json:"role"`
		Content   *string           `json:"content"`
		Refusal   *string           `json:"refusal"`
		ToolCalls []chatToolCallOut `json:"tool_calls,omitempty"`
		// LiteLLM's reasoning fields: the joined reasoning, and Anthropic's thinking blocks
		// with their signatures (sent back in a later turn, they reach Anthropic again).
		Reasoning      string          `json:"reasoning_content,omitempty"`
		ThinkingBlocks []thinkingBlock `json:"thinking_blocks,omitempty"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		Logprobs     *int    `json:"logprobs"`
		FinishReason string  `json:"finish_reason"`
	}
	msg := message{Role: "assistant"}
	text := r.text()
	if text != "" || len(r.blocks) == 0 {
		msg.Content = &text
	}
	for _, b := range r.blocks {
		if b.think {
			msg.Reasoning += b.text
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, thinkingBlock{Type: "thinking", Thinking: b.text, Signature: b.sig})
		}
		if b.tool {
			tc := chatToolCallOut{ID: b.id, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = b.name, b.args
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
	}
	return marshal(struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []choice     `json:"choices"`
		Usage   chatUsageOut `json:"usage"`
	}{r.id, "chat.completion", created, r.model, []choice{{Message: msg, FinishReason: r.stop.chatFinish()}}, chatUsage(r.usage)})
}

// renderCompletion renders an OpenAI text_completion
// (https://platform.openai.com/docs/api-reference/completions/object).
func renderCompletion(r *result, created int64) []byte {
	type choice struct {
		Text         string `json:"text"`
		Index        int    `json:"index"`
		Logprobs     *int   `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	}
	return marshal(struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []choice     `json:"choices"`
		Usage   chatUsageOut `json:"usage"`
	}{r.id, "text_completion", created, r.model, []choice{{Text: r.text(), FinishReason: r.stop.chatFinish()}}, chatUsage(r.usage)})
}

// thinkingBlock is an Anthropic thinking block (also LiteLLM's chat thinking_blocks item).
type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type anthropicBlockOut struct {
	Type      string  `json:"type"`
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	Text      *string `json:"text,omitempty"`
	ID        string  `json:"id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Input     rawJSON `json:"input,omitempty"`
}

type anthropicUsageOut struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

func anthropicUsage(u usage) anthropicUsageOut {
	return anthropicUsageOut{InputTokens: u.anthropicInput(), OutputTokens: u.out, CacheCreationInputTokens: u.cacheWrite, CacheReadInputTokens: u.cacheRead}
}

// renderMessages renders an Anthropic Message (https://docs.anthropic.com/en/api/messages).
func renderMessages(r *result) []byte {
	content := make([]anthropicBlockOut, 0, len(r.blocks))
	for _, b := range r.blocks {
		if b.think {
			t, sig := b.text, b.sig
			content = append(content, anthropicBlockOut{Type: "thinking", Thinking: &t, Signature: &sig})
		} else if b.tool {
			content = append(content, anthropicBlockOut{Type: "tool_use", ID: b.id, Name: b.name, Input: validObject(b.args)})
		} else if b.text != "" {
			t := b.text
			content = append(content, anthropicBlockOut{Type: "text", Text: &t})
		}
	}
	var seq *string
	if r.stopSeq != "" {
		seq = &r.stopSeq
	}
	return marshal(struct {
		ID           string              `json:"id"`
		Type         string              `json:"type"`
		Role         string              `json:"role"`
		Model        string              `json:"model"`
		Content      []anthropicBlockOut `json:"content"`
		StopReason   string              `json:"stop_reason"`
		StopSequence *string             `json:"stop_sequence"`
		Usage        anthropicUsageOut   `json:"usage"`
	}{r.id, "message", "assistant", r.model, content, r.stop.anthropicStop(), seq, anthropicUsage(r.usage)})
}

// Responses API object shapes (https://platform.openai.com/docs/api-reference/responses/object).

type respTextPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type respItem struct {
	ID        string  `json:"id"`
	Type      string  `json:"type"`
	Status    string  `json:"status"`
	Role      string  `json:"role,omitempty"`
	Content   any     `json:"content,omitempty"` // []respTextPart for messages (may be empty), nil for calls
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Namespace string  `json:"namespace,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
	// reasoning items: the thinking as one summary part, its signature in encrypted_content
	Summary          []respSummary `json:"summary,omitempty"`
	EncryptedContent string        `json:"encrypted_content,omitempty"`
}

type respSummary struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respObject struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Error              *struct{}       `json:"error"`
	IncompleteDetails  *respIncomplete `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	Model              string          `json:"model"`
	Output             []respItem      `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Text               struct {
		Format struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
	ToolChoice string     `json:"tool_choice"`
	Tools      []any      `json:"tools"`
	Usage      *respUsage `json:"usage"`
	Metadata   struct{}   `json:"metadata"`
}

// responsesItem converts output block i into a Responses output item. Item ids derive from
// base and i so that a stream's events and its final object agree.
func responsesItem(b block, base string, i int, status string) respItem {
	if b.think {
		it := respItem{ID: itemID("rs", base, i), Type: "reasoning", Status: status, Summary: []respSummary{}}
		if b.text != "" {
			it.Summary = append(it.Summary, respSummary{Type: "summary_text", Text: b.text})
		}
		if b.sig != "" {
			it.EncryptedContent = thinkingSigPrefix + b.sig
		}
		return it
	}
	if b.tool {
		args := b.args
		return respItem{ID: itemID("fc", base, i), Type: "function_call", Status: status, CallID: b.id, Name: b.name, Namespace: b.ns, Arguments: &args}
	}
	return respItem{ID: itemID("msg", base, i), Type: "message", Status: status, Role: "assistant",
		Content: []respTextPart{{Type: "output_text", Text: b.text, Annotations: []any{}, Logprobs: []any{}}}}
}

func responsesItems(blocks []block, base string, status string) []respItem {
	items := make([]respItem, 0, len(blocks))
	for i, b := range blocks {
		items = append(items, responsesItem(b, base, i, status))
	}
	return items
}

func itemID(prefix, base string, i int) string {
	return prefix + "_" + base + "_" + string(AppendInt(nil, int64(i)))
}

func newRespObject(id, model string, created int64, status string) respObject {
	o := respObject{ID: id, Object: "response", CreatedAt: created, Status: status, Model: model,
		Output: []respItem{}, ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{}}
	o.Text.Format.Type = "text"
	return o
}

func respUsageOf(u usage) *respUsage {
	ru := &respUsage{InputTokens: u.in, OutputTokens: u.out, TotalTokens: u.in + u.out}
	ru.InputTokensDetails.CachedTokens = u.cacheRead
	return ru
}

// responsesStatus maps a stop reason to the Responses status and incomplete_details.
func responsesStatus(s stopReason) (string, *respIncomplete) {
	switch s {
	case stopLength:
		return "incomplete", &respIncomplete{Reason: "max_output_tokens"}
	case stopFilter:
		return "incomplete", &respIncomplete{Reason: "content_filter"}
	}
	return "completed", nil
}

// responsesBase returns the id stem used for a translated response's ids.
func responsesBase(upstreamID string) string {
	for _, p := range []string{"msg_", "chatcmpl-", "resp_"} {
		upstreamID = strings.TrimPrefix(upstreamID, p)
	}
	if upstreamID == "" {
		return newID("")
	}
	return upstreamID
}

func renderResponsesObject(r *result, created int64) respObject {
	base := responsesBase(r.id)
	status, inc := responsesStatus(r.stop)
	o := newRespObject("resp_"+base, r.model, created, status)
	o.IncompleteDetails = inc
	o.Output = responsesItems(r.blocks, base, "completed")
	o.Usage = respUsageOf(r.usage)
	return o
}

// renderResponses renders an OpenAI Responses API response object.
func renderResponses(r *result, created int64) []byte {
	return marshal(renderResponsesObject(r, created))
}

func now() int64 { return time.Now().Unix() }

// parseResponsesResult reads an OpenAI Responses API response object.
func parseResponsesResult(body []byte) (*result, error) {
	if !ValidJSON(body) {
		return nil, errBadUpstreamJSON
	}
	root := gjson.Parse(bytesView(body)) // views body: what is read from it aliases it (never modified)
	r := &result{id: root.Get("id").Str, model: root.Get("model").Str}
	root.Get("output").ForEach(func(_, it gjson.Result) bool {
		switch it.Get("type").Str {
		case "message":
			if t := contentText(it.Get("content")); t != "" {
				r.blocks = append(r.blocks, block{text: t})
			}
		case "function_call":
			r.blocks = append(r.blocks, block{tool: true, id: it.Get("call_id").Str, name: it.Get("name").Str, args: it.Get("arguments").Str})
			r.stop = stopTool
		}
		return true
	})
	if root.Get("status").Str == "incomplete" {
		r.stop = stopLength
		if root.Get("incomplete_details.reason").Str == "content_filter" {
			r.stop = stopFilter
		}
	}
	u := root.Get("usage")
	r.usage = usage{in: u.Get("input_tokens").Int(), out: u.Get("output_tokens").Int(), cacheRead: u.Get("input_tokens_details.cached_tokens").Int()}
	return r, nil
}

// ParseResult reads a non-streaming answer of upstream format f: Anthropic Messages, OpenAI
// Responses, else OpenAI chat. Errors: [ErrBadUpstreamJSON] or what is malformed.
func ParseResult(f Format, body []byte) (*Result, error) {
	switch f {
	case FormatMessages:
		return parseMessagesResult(body)
	case FormatResponses:
		return parseResponsesResult(body)
	}
	return parseChatResult(body)
}

// DefaultModel names the answer's model when the upstream did not.
func (r *result) DefaultModel(model string) {
	if r.model == "" {
		r.model = model
	}
}

// Usage is the answer's token usage as the gateway charges it.
func (r *result) Usage() Usage { return r.usage.public() }

// AnswerText is the assistant text of an answer in format f: the first choice's content
// (chat), the text blocks (messages), the message items' output_text (responses); "" for
// embeddings.
func AnswerText(f Format, body []byte) string { return answerText(f, body) }

func render(in Format, res *result) []byte {
	switch in {
	case FormatMessages:
		return renderMessages(res)
	case FormatResponses:
		return renderResponses(res, now())
	case FormatCompletions:
		return renderCompletion(res, now())
	}
	return renderChat(res, now())
}

// answerText extracts the assistant text of an answer in format f (a copy: it does not alias
// body).
func answerText(f Format, body []byte) string {
	return strings.Clone(answerTextView(f, body))
}

func answerTextView(f Format, body []byte) string {
	j := gjson.Parse(bytesView(body))
	switch f {
	case FormatChat:
		return contentText(j.Get("choices.0.message.content"))
	case FormatMessages:
		return contentText(j.Get("content"))
	case FormatResponses:
		var sb strings.Builder
		j.Get("output").ForEach(func(_, it gjson.Result) bool {
			if it.Get("type").Str == "message" {
				sb.WriteString(contentText(it.Get("content")))
			}
			return true
		})
		return sb.String()
	case FormatCompletions:
		return j.Get("choices.0.text").Str
	case FormatTranscriptions:
		if !j.IsObject() { // response_format text, srt, vtt
			return string(body)
		}
		return j.Get("text").Str
	}
	return ""
}
