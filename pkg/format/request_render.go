package format

import (
	"strings"
)

// appendKey appends `,"key":` (or `"key":` right after the opening brace).
func appendKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' && b[len(b)-1] != '[' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendRaw appends member key with the raw JSON value raw; nothing when raw is "".
func appendRaw(b []byte, key, raw string) []byte {
	if raw == "" {
		return b
	}
	return append(appendKey(b, key), raw...)
}

// renderChatRequest renders the neutral request as an OpenAI chat completion request. When
// streaming it asks for the usage chunk (stream_options.include_usage), which the inbound
// formats need for their final events.
func renderChatRequest(r *request, model string, maxCompletionTokens bool) []byte {
	b := make([]byte, 0, 512)
	b = append(b, '{')
	b = appendKey(b, "model")
	b = AppendJSONString(b, model)
	b = appendKey(b, "messages")
	b = append(b, '[')
	first := true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	for _, s := range r.system {
		sep()
		b = append(b, `{"role":"system","content":`...)
		b = AppendJSONString(b, s)
		b = append(b, '}')
	}
	for _, m := range r.messages {
		if m.role == "assistant" {
			var text strings.Builder
			var calls []part
			for _, p := range m.parts {
				switch p.kind {
				case partText:
					text.WriteString(p.text)
				case partToolUse:
					calls = append(calls, p)
				case partThinking: // only a Responses reasoning item brings one here
					r.drop("input.reasoning")
				}
			}
			sep()
			b = append(b, `{"role":"assistant","content":`...)
			if text.Len() == 0 && len(calls) > 0 {
				b = append(b, "null"...)
			} else {
				b = AppendJSONString(b, text.String())
			}
			if len(calls) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for i, c := range calls {
					if i > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"id":`...)
					b = AppendJSONString(b, c.id)
					b = append(b, `,"type":"function","function":{"name":`...)
					b = AppendJSONString(b, c.name)
					b = append(b, `,"arguments":`...)
					b = AppendJSONString(b, c.args)
					b = append(b, `}}`...)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
			continue
		}
		// user: tool results become role "tool" messages (first, as they answer the previous
		// assistant turn), the rest one user message.
		var rest []part
		for _, p := range m.parts {
			if p.kind != partToolResult {
				rest = append(rest, p)
				continue
			}
			sep()
			b = append(b, `{"role":"tool","tool_call_id":`...)
			b = AppendJSONString(b, p.id)
			b = append(b, `,"content":`...)
			b = AppendJSONString(b, p.text)
			b = append(b, '}')
		}
		if len(rest) == 0 {
			continue
		}
		sep()
		b = append(b, `{"role":"user","content":`...)
		if len(rest) == 1 && rest[0].kind == partText {
			b = AppendJSONString(b, rest[0].text)
		} else {
			b = append(b, '[')
			for i, p := range rest {
				if i > 0 {
					b = append(b, ',')
				}
				if p.kind == partImage {
					b = append(b, `{"type":"image_url","image_url":{"url":`...)
					b = AppendJSONString(b, p.url)
					b = append(b, `}}`...)
				} else if p.kind == partDocument {
					var ok bool
					if b, ok = appendChatFile(b, r, p); !ok {
						b = append(b, `{"type":"text","text":""}`...)
					}
				} else {
					b = append(b, `{"type":"text","text":`...)
					b = AppendJSONString(b, p.text)
					b = append(b, '}')
				}
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if r.maxTokens > 0 {
		if maxCompletionTokens {
			b = appendKey(b, "max_completion_tokens")
		} else {
			b = appendKey(b, "max_tokens")
		}
		b = AppendInt(b, r.maxTokens)
	}
	b = appendRaw(b, "temperature", r.temperature)
	b = appendRaw(b, "top_p", r.topP)
	if len(r.stop) > 0 {
		b = appendKey(b, "stop")
		b = appendStrings(b, r.stop)
	}
	if r.topK != "" {
		r.drop("top_k")
	}
	nfunc := 0
	for _, t := range r.tools {
		if t.hosted != "" {
			r.drop("tools." + t.hosted) // no hosted tools on chat upstreams
		} else {
			nfunc++
		}
	}
	if nfunc > 0 {
		b = appendKey(b, "tools")
		b = append(b, '[')
		first := true
		for _, t := range r.tools {
			if t.hosted != "" {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"type":"function","function":{"name":`...)
			b = AppendJSONString(b, t.name)
			if t.description != "" {
				b = append(b, `,"description":`...)
				b = AppendJSONString(b, t.description)
			}
			b = append(b, `,"parameters":`...)
			b = append(b, schemaOrEmpty(t.schema)...)
			b = append(b, `}}`...)
		}
		b = append(b, ']')
	}
	switch mode := r.choice.mode; {
	case nfunc == 0 && mode != "":
		// only hosted tools were chosen among: nothing left to choose
	case mode == "tool" && r.hasHosted(r.choice.name):
		r.drop("tool_choice." + r.choice.name) // a hosted tool, dropped above
	case mode == "auto" || mode == "none":
		b = appendKey(b, "tool_choice")
		b = AppendJSONString(b, r.choice.mode)
	case mode == "any":
		b = appendKey(b, "tool_choice")
		b = append(b, `"required"`...)
	case mode == "tool":
		b = appendKey(b, "tool_choice")
		b = append(b, `{"type":"function","function":{"name":`...)
		b = AppendJSONString(b, r.choice.name)
		b = append(b, `}}`...)
	}
	if r.parallel != "" && nfunc > 0 {
		b = appendKey(b, "parallel_tool_calls")
		b = append(b, r.parallel...)
	}
	if r.format.kind != "" {
		b = appendResponseFormat(b, r.format)
	}
	if r.effort != "" && reasoningModel(model) {
		b = appendKey(b, "reasoning_effort")
		b = AppendJSONString(b, r.effort)
	} else if r.effort != "" {
		r.drop("reasoning_effort") // a model without reasoning refuses the member
	}
	if r.user != "" {
		b = appendKey(b, "user")
		b = AppendJSONString(b, r.user)
	}
	if r.stream {
		b = appendKey(b, "stream")
		b = append(b, `true,"stream_options":{"include_usage":true}`...)
	}
	return append(b, '}')
}

func schemaOrEmpty(s string) string {
	if s == "" || s == "null" {
		return `{"type":"object","properties":{}}`
	}
	return s
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, s)
	}
	return append(b, ']')
}

// renderMessagesRequest renders the neutral request as an Anthropic Messages request.
// max_tokens defaults to [DefaultAnthropicMaxTokens] (plus the thinking budget when reasoning
// is asked, as LiteLLM does); consecutive messages of one role are merged and empty text
// blocks dropped (Anthropic rejects both). Structured output is output_config.format when
// nativeJSON (the model has structured outputs), else the forced jsonToolName tool (LiteLLM's
// map_response_format_to_anthropic_tool; not forced while thinking, which Anthropic refuses
// with a forced tool), and r.jsonTool is set.
func renderMessagesRequest(r *request, model string, nativeJSON bool) []byte {
	if r.effort != "" && !anthropicThinks(model) {
		r.effort = ""
		r.drop("reasoning_effort") // no extended thinking on this model
	}
	b := make([]byte, 0, 512)
	b = append(b, '{')
	b = appendKey(b, "model")
	b = AppendJSONString(b, model)
	b = appendKey(b, "max_tokens")
	switch {
	case r.maxTokens > 0:
		b = AppendInt(b, r.maxTokens)
	case r.effort != "":
		b = AppendInt(b, DefaultAnthropicMaxTokens+thinkingBudget(r.effort))
	default:
		b = AppendInt(b, DefaultAnthropicMaxTokens)
	}
	if budget := fitBudget(r); budget > 0 {
		b = appendKey(b, "thinking")
		b = append(b, `{"type":"enabled","budget_tokens":`...)
		b = AppendInt(b, budget)
		b = append(b, '}')
	}
	r.jsonTool = r.format.kind == "json_object" || (r.format.kind == "json_schema" && !nativeJSON)
	if r.format.kind == "json_schema" && nativeJSON {
		b = appendKey(b, "output_config")
		b = append(b, `{"format":{"type":"json_schema","schema":`...)
		b = append(b, schemaOrEmpty(r.format.schema)...)
		b = append(b, `}}`...)
	}
	if len(r.system) > 0 {
		b = appendKey(b, "system")
		if len(r.system) == 1 && r.systemCache == nil {
			b = AppendJSONString(b, r.system[0])
		} else {
			b = append(b, '[')
			for i, s := range r.system {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"type":"text","text":`...)
				b = AppendJSONString(b, s)
				b = append(b, '}')
				if r.systemCache != nil {
					b = withCache(b, r.systemCache[i])
				}
			}
			b = append(b, ']')
		}
	}
	b = appendKey(b, "messages")
	b = append(b, '[')
	firstMsg := true
	for _, m := range r.messages {
		start := len(b)
		if !firstMsg {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = AppendJSONString(b, m.role)
		b = append(b, `,"content":[`...)
		n := 0
		for _, p := range m.parts {
			if p.kind == partText && p.text == "" {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			switch p.kind {
			case partText:
				b = append(b, `{"type":"text","text":`...)
				b = AppendJSONString(b, p.text)
				b = append(b, '}')
			case partImage:
				b = appendAnthropicImage(b, p.url)
			case partDocument:
				b = appendAnthropicDocument(b, p)
			case partThinking:
				b = append(b, `{"type":"thinking","thinking":`...)
				b = AppendJSONString(b, p.text)
				b = append(b, `,"signature":`...)
				b = AppendJSONString(b, p.id)
				b = append(b, '}')
			case partToolUse:
				b = append(b, `{"type":"tool_use","id":`...)
				b = AppendJSONString(b, p.id)
				b = append(b, `,"name":`...)
				b = AppendJSONString(b, p.name)
				b = append(b, `,"input":`...)
				b = append(b, validObject(p.args)...)
				b = append(b, '}')
			case partToolResult:
				b = append(b, `{"type":"tool_result","tool_use_id":`...)
				b = AppendJSONString(b, p.id)
				b = append(b, `,"content":`...)
				b = AppendJSONString(b, p.text)
				if p.err {
					b = append(b, `,"is_error":true`...)
				}
				b = append(b, '}')
			}
			b = withCache(b, p.cache)
		}
		if n == 0 { // nothing left to send in this message
			b = b[:start]
			continue
		}
		firstMsg = false
		b = append(b, `]}`...)
	}
	b = append(b, ']')
	b = appendRaw(b, "temperature", r.temperature)
	b = appendRaw(b, "top_p", r.topP)
	b = appendRaw(b, "top_k", r.topK)
	if stops := anthropicStops(r); len(stops) > 0 {
		b = appendKey(b, "stop_sequences")
		b = appendStrings(b, stops)
	}
	if (len(r.tools) > 0 && r.choice.mode != "none") || r.jsonTool {
		b = appendKey(b, "tools")
		b = append(b, '[')
		n := 0
		for _, t := range r.tools {
			if r.choice.mode == "none" {
				break
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			if t.hosted != "" {
				b = appendAnthropicWebSearch(b, t)
				continue
			}
			b = append(b, `{"name":`...)
			b = AppendJSONString(b, t.name)
			if t.description != "" {
				b = append(b, `,"description":`...)
				b = AppendJSONString(b, t.description)
			}
			b = append(b, `,"input_schema":`...)
			b = append(b, schemaOrEmpty(t.schema)...)
			b = append(b, '}')
			b = withCache(b, t.cache)
		}
		if r.jsonTool {
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":"`+jsonToolName+`","input_schema":`...)
			if r.format.kind == "json_schema" {
				b = append(b, schemaOrEmpty(r.format.schema)...)
			} else {
				b = append(b, `{"type":"object","properties":{},"additionalProperties":true}`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if r.jsonTool && r.effort == "" {
		b = appendKey(b, "tool_choice")
		b = append(b, `{"type":"tool","name":"`+jsonToolName+`"`...)
		if r.parallel == "false" {
			b = append(b, `,"disable_parallel_tool_use":true`...)
		}
		b = append(b, '}')
	} else if len(r.tools) > 0 && r.choice.mode != "none" && (r.choice.mode != "" || r.parallel == "false") {
		mode := r.choice.mode
		if mode == "" {
			mode = "auto"
		}
		b = appendKey(b, "tool_choice")
		b = append(b, `{"type":`...)
		b = AppendJSONString(b, mode)
		if mode == "tool" {
			b = append(b, `,"name":`...)
			b = AppendJSONString(b, r.choice.name)
		}
		if r.parallel == "false" {
			b = append(b, `,"disable_parallel_tool_use":true`...)
		}
		b = append(b, '}')
	}
	if r.user != "" && strings.Contains(r.user, "@") {
		r.drop("user") // Anthropic refuses an email as metadata.user_id (LiteLLM's _valid_user_id)
	} else if r.user != "" {
		b = appendKey(b, "metadata")
		b = append(b, `{"user_id":`...)
		b = AppendJSONString(b, r.user)
		b = append(b, '}')
	}
	if r.stream {
		b = appendKey(b, "stream")
		b = append(b, "true"...)
	}
	return append(b, '}')
}

// appendAnthropicImage renders an image block from a URL: data URLs become base64 sources,
// others url sources (https://docs.anthropic.com/en/docs/build-with-claude/vision).
func appendAnthropicImage(b []byte, u string) []byte {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok && strings.HasSuffix(meta, ";base64") {
			b = append(b, `{"type":"image","source":{"type":"base64","media_type":`...)
			b = AppendJSONString(b, strings.TrimSuffix(meta, ";base64"))
			b = append(b, `,"data":`...)
			b = AppendJSONString(b, data)
			return append(b, `}}`...)
		}
	}
	b = append(b, `{"type":"image","source":{"type":"url","url":`...)
	b = AppendJSONString(b, u)
	return append(b, `}}`...)
}

// DefaultAnthropicMaxTokens is the max_tokens sent to Anthropic when a translated request has
// none (Anthropic requires it; LiteLLM's default for Anthropic is 4096).
const DefaultAnthropicMaxTokens = 4096
