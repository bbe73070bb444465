package format

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
)

// The translation table (docs/api.md "Format translation") in one place: which request
// fields each inbound format translates, which the gateway consumes itself, and how the
// cross-format features (structured output, reasoning, hosted and namespace tools) map. A
// field of the client's request that is neither translated nor consumed is dropped and named
// in the answer's x-lockstep-dropped header (API.md "Format translation": nothing is dropped
// silently); one that cannot be honoured at all is a 400 naming it (the parsers).

// DroppedHeader is the answer header naming, comma-separated, what a translated request left
// out (API.md "Format translation").
const DroppedHeader = "X-Lockstep-Dropped"

// gatewayFields are request members the gateway itself consumes on every route (LiteLLM
// proxy parameters): never sent upstream, never reported as dropped.
var gatewayFields = map[string]bool{
	"model": true, "stream": true, "metadata": true, "litellm_metadata": true, "guardrails": true,
	"fallbacks": true, "context_window_fallbacks": true, "tags": true, "num_retries": true,
	"mock_response": true, "mock_testing_rate_limit_error": true, "mock_timeout": true,
	"mock_testing_fallbacks": true, "caching": true, "safety_identifier": true,
}

// chatFields: the chat members parseChatRequest reads (stream_options: include_usage is
// honoured by the stream renderer).
var chatFields = fieldSet("messages", "stream_options", "max_tokens", "max_completion_tokens",
	"temperature", "top_p", "stop", "tools", "tool_choice", "parallel_tool_calls", "user",
	"response_format", "reasoning_effort", "web_search_options", "n")

// messagesFields: the Anthropic Messages members parseMessagesRequest reads (metadata holds
// only user_id in Anthropic's API).
var messagesFields = fieldSet("messages", "system", "max_tokens", "temperature", "top_p", "top_k",
	"stop_sequences", "tools", "tool_choice", "thinking", "output_config", "output_format")

// responsesFields: the Responses members parseResponsesRequest reads; store false is what the
// gateway does anyway (it keeps no responses), so only store true is reported.
var responsesFields = fieldSet("input", "instructions", "max_output_tokens", "temperature", "top_p",
	"tools", "tool_choice", "parallel_tool_calls", "user", "text", "reasoning",
	"previous_response_id", "conversation")

func fieldSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names)+len(gatewayFields))
	for k := range gatewayFields {
		m[k] = true
	}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// drop records that translation left name out.
func (r *request) drop(name string) {
	for _, d := range r.dropped {
		if d == name {
			return
		}
	}
	r.dropped = append(r.dropped, name)
}

// dropUnknown records every top-level member of root not in known (null members and
// "store": false are no request).
func (r *request) dropUnknown(root gjson.Result, known map[string]bool) {
	root.ForEach(func(k, v gjson.Result) bool {
		if !known[k.Str] && v.Type != gjson.Null && (k.Str != "store" || v.Type == gjson.True) {
			r.drop(k.Str)
		}
		return true
	})
}

var cacheControlKey = []byte(`"cache_control"`)

// dropNative records what the native translations (Gemini, Bedrock Converse, Ollama) do not
// carry: structured output (unless the Wire is an [OutputFormatWire]: Gemini, Ollama, Bedrock),
// reasoning, hosted tools; documents are refused (400).
func (r *request) DropNative(provider string, outputFormat bool) error {
	for _, m := range r.messages {
		for _, p := range m.parts {
			if p.kind == partDocument {
				return BadRequest("messages: documents cannot be translated for provider %s", provider)
			}
			if p.kind == partThinking {
				r.drop("messages.thinking_blocks")
			}
		}
	}
	if !outputFormat {
		switch r.format.kind {
		case "json_schema", "json_object":
			r.drop(r.format.member) // named as the client sent it
		}
	}
	if r.effort != "" {
		r.drop("reasoning")
	}
	for _, t := range r.tools {
		if t.hosted != "" {
			r.drop("tools." + t.hosted)
		}
	}
	return nil
}

// dropMembers records the members of object v (request member name) other than keep.
func (r *request) dropMembers(name string, v gjson.Result, keep string) {
	v.ForEach(func(k, m gjson.Result) bool {
		if k.Str != keep && m.Type != gjson.Null {
			r.drop(name + "." + k.Str)
		}
		return true
	})
}

// ---- cache_control ----

// cacheOf returns the cache_control object of the first of vs that has one, or of the last
// part of a content array among them (LiteLLM reads a chat message's cache_control from the
// message or its content parts), counting it as carried.
func (r *request) cacheOf(vs ...gjson.Result) string {
	for _, v := range vs {
		c := v.Get("cache_control")
		if !c.IsObject() && v.IsArray() {
			c = gjson.Result{}
			v.ForEach(func(_, p gjson.Result) bool {
				if pc := p.Get("cache_control"); pc.IsObject() {
					c = pc
				}
				return true
			})
		}
		if c.IsObject() {
			r.cached++
			return c.Raw
		}
	}
	return ""
}

func (r *request) addSystem(text, cache string) {
	if cache != "" && r.systemCache == nil {
		r.systemCache = make([]string, len(r.system), len(r.system)+1)
	}
	r.system = append(r.system, text)
	if r.systemCache != nil {
		r.systemCache = append(r.systemCache, cache)
	}
}

// withCache adds "cache_control": raw to the object ending b.
func withCache(b []byte, raw string) []byte {
	if raw == "" {
		return b
	}
	b = append(b[:len(b)-1], `,"cache_control":`...)
	b = append(b, raw...)
	return append(b, '}')
}

// dropCache reports cache_control objects of body the translation did not carry: all of
// them unless the upstream is Anthropic's (which takes the ones on chat system, user and tool
// messages, their parts, and tools).
func (r *request) DropCache(body []byte, toAnthropic bool) {
	n := bytes.Count(body, cacheControlKey)
	if !toAnthropic {
		r.cached = 0
	}
	if n > r.cached {
		r.drop("cache_control")
	}
}

// ---- structured output ----

// outputFormat is a request for structured output: kind "json_schema" (schema: the JSON
// schema text, name and strict as the client gave them) or "json_object" (any JSON object).
type outputFormat struct {
	kind   string
	name   string
	schema string
	strict string // raw JSON boolean or ""
	member string // the client's member it came in (response_format, text.format, output_config.format, output_format): named when dropped
}

// chatResponseFormat reads chat's response_format: {type: json_schema, json_schema: {name,
// schema, strict}} or {type: json_object}; {type: text} is the default.
func chatResponseFormat(v gjson.Result) outputFormat {
	switch v.Get("type").Str {
	case "json_schema":
		js := v.Get("json_schema")
		return outputFormat{kind: "json_schema", name: js.Get("name").Str, schema: js.Get("schema").Raw, strict: boolRaw(js.Get("strict")), member: "response_format"}
	case "json_object":
		return outputFormat{kind: "json_object", member: "response_format"}
	}
	return outputFormat{}
}

// responsesTextFormat reads Responses text.format: {type: json_schema, name, schema, strict}
// or {type: json_object}.
func responsesTextFormat(text gjson.Result) outputFormat {
	f := text.Get("format")
	switch f.Get("type").Str {
	case "json_schema":
		return outputFormat{kind: "json_schema", name: f.Get("name").Str, schema: f.Get("schema").Raw, strict: boolRaw(f.Get("strict")), member: "text.format"}
	case "json_object":
		return outputFormat{kind: "json_object", member: "text.format"}
	}
	return outputFormat{}
}

// messagesOutputFormat reads Anthropic's output_config.format (or the beta output_format):
// {type: json_schema, schema}.
func messagesOutputFormat(root gjson.Result) outputFormat {
	member := "output_config.format"
	f := root.Get(member)
	if !f.Exists() {
		member = "output_format"
		f = root.Get(member)
	}
	if f.Get("type").Str == "json_schema" {
		return outputFormat{kind: "json_schema", schema: f.Get("schema").Raw, member: member}
	}
	return outputFormat{}
}

func boolRaw(v gjson.Result) string {
	if v.IsBool() {
		return v.Raw
	}
	return ""
}

// jsonToolName is the forced tool carrying structured output to an Anthropic model without
// native structured outputs (LiteLLM's RESPONSE_FORMAT_TOOL_NAME); its call's input is
// answered as the message text.
const jsonToolName = "json_tool_call"

// anthropicNativeJSON reports whether an Anthropic model takes output_config.format
// (structured outputs: Claude Sonnet 4.5, Opus 4.1, Opus 4.5, Haiku 4.5 and later, per
// Anthropic's structured outputs guide); older models get the forced tool.
func anthropicNativeJSON(model string) bool {
	m := strings.ReplaceAll(model, ".", "-")
	for _, fam := range [...]string{"sonnet-4-", "opus-4-", "haiku-4-"} {
		i := strings.Index(m, fam)
		if i < 0 {
			continue
		}
		minor := m[i+len(fam):]
		if minor == "" || minor[0] < '0' || minor[0] > '9' {
			return false
		}
		// "opus-4-1…" and any 4-5 or later; a date (sonnet-4-20250514) is 4.0.
		if len(minor) > 1 && minor[1] >= '0' && minor[1] <= '9' {
			return false
		}
		return minor[0] >= '5' || (fam == "opus-4-" && minor[0] >= '1')
	}
	return false
}

// appendResponseFormat appends chat's response_format for f.
func appendResponseFormat(b []byte, f outputFormat) []byte {
	b = appendKey(b, "response_format")
	if f.kind == "json_object" {
		return append(b, `{"type":"json_object"}`...)
	}
	b = append(b, `{"type":"json_schema","json_schema":{"name":`...)
	name := f.name
	if name == "" {
		name = "response"
	}
	b = AppendJSONString(b, name)
	b = append(b, `,"schema":`...)
	b = append(b, schemaOrEmpty(f.schema)...)
	if f.strict != "" {
		b = append(b, `,"strict":`...)
		b = append(b, f.strict...)
	}
	return append(b, `}}`...)
}

// ---- reasoning ----

// Thinking budgets for reasoning efforts (LiteLLM's DEFAULT_REASONING_EFFORT_*_THINKING_BUDGET).
const (
	budgetLow    = 1024
	budgetMedium = 2048
	budgetHigh   = 4096
)

// effortOf normalises an OpenAI reasoning effort: "minimal" counts as "low" (Anthropic's
// smallest budget is 1024 tokens); "none" and unknown values ask for no reasoning.
func effortOf(s string) string {
	switch s {
	case "minimal", "low":
		return "low"
	case "medium", "high":
		return s
	}
	return ""
}

// effortOfBudget maps Anthropic's thinking {type: enabled, budget_tokens} to an effort, the
// inverse of thinkingBudget: below 2048 low, below 4096 medium, else high.
func effortOfBudget(t gjson.Result) string {
	if t.Get("type").Str != "enabled" {
		return ""
	}
	switch n := t.Get("budget_tokens").Int(); {
	case n < budgetMedium:
		return "low"
	case n < budgetHigh:
		return "medium"
	}
	return "high"
}

// reasoningModel reports whether an OpenAI-format model takes reasoning_effort: OpenAI's
// o-series, gpt-5 and gpt-oss, DeepSeek's reasoner and R1, Qwen3 and Grok 3 mini (LiteLLM
// sends it only where supports_reasoning holds; other models answer 400 to it).
func reasoningModel(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if len(m) >= 2 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9' {
		return true
	}
	for _, p := range [...]string{"gpt-5", "gpt-oss", "deepseek-reasoner", "deepseek-r1", "qwen3", "qwq", "grok-3-mini"} {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}

// anthropicThinks reports whether a Claude model has extended thinking: Claude 3.7 Sonnet and
// the Claude 4 families (LiteLLM's supports_reasoning for anthropic).
func anthropicThinks(model string) bool {
	m := strings.ReplaceAll(model, ".", "-")
	if strings.Contains(m, "3-7-sonnet") {
		return true
	}
	for _, fam := range [...]string{"sonnet-4", "opus-4", "haiku-4", "claude-4"} {
		if strings.Contains(m, fam) {
			return true
		}
	}
	return false
}

// effortOfOutputConfig maps Anthropic's output_config.effort (low, medium, high, xhigh,
// max) to a reasoning effort: the three shared levels as they are, the higher ones high.
func effortOfOutputConfig(e string) string {
	switch e {
	case "low", "medium", "high":
		return e
	case "xhigh", "max":
		return "high"
	}
	return ""
}

// fitBudget is the thinking budget for r's effort within its max_tokens: Anthropic wants
// budget_tokens below max_tokens and at least 1024, so a smaller max_tokens lowers the budget,
// and one of 1024 or less leaves no room to think (reported as "reasoning_effort"). 0 = no
// thinking.
func fitBudget(r *request) int64 {
	if r.effort == "" {
		return 0
	}
	budget := thinkingBudget(r.effort)
	if r.maxTokens > 0 && r.maxTokens <= budget {
		budget = r.maxTokens - 1
	}
	if budget < budgetLow {
		r.drop("reasoning_effort")
		return 0
	}
	return budget
}

func thinkingBudget(effort string) int64 {
	switch effort {
	case "low":
		return budgetLow
	case "medium":
		return budgetMedium
	}
	return budgetHigh
}

// dropSystemTurnExtras records what folding a system turn of messages into the system prompt
// leaves out: its per-turn members (clear_at, output_config) and non-text blocks.
func (r *request) dropSystemTurnExtras(m gjson.Result) {
	m.ForEach(func(k, v gjson.Result) bool {
		if k.Str != "role" && k.Str != "content" && v.Type != gjson.Null {
			r.drop("messages.system." + k.Str)
		}
		return true
	})
	m.Get("content").ForEach(func(_, b gjson.Result) bool {
		if typ := b.Get("type").Str; typ != "text" {
			r.drop("messages.system.content." + typ)
		}
		return true
	})
}

// anthropicStops is r.stop without whitespace-only sequences, which Anthropic refuses
// (LiteLLM's _map_stop_sequences drops them too); dropping one is reported as "stop".
func anthropicStops(r *request) []string {
	for i, s := range r.stop {
		if strings.TrimSpace(s) != "" {
			continue
		}
		out := append([]string(nil), r.stop[:i]...)
		for _, s := range r.stop[i:] {
			if strings.TrimSpace(s) != "" {
				out = append(out, s)
			}
		}
		r.drop("stop")
		return out
	}
	return r.stop
}

// ---- content ----

// anthropicSourceURL is an Anthropic image or document source as a URL: base64 → data: URL,
// url as it is; "" for other sources.
func anthropicSourceURL(src gjson.Result) string {
	switch src.Get("type").Str {
	case "base64":
		return "data:" + src.Get("media_type").Str + ";base64," + src.Get("data").Str
	case "url":
		return src.Get("url").Str
	}
	return ""
}

// appendChatFile appends a chat file part for a document (data: URLs only: chat takes no
// file URLs — a URL document is dropped, reported as "messages.content.document").
func appendChatFile(b []byte, r *request, p part) ([]byte, bool) {
	if !strings.HasPrefix(p.url, "data:") {
		r.drop("messages.content.document")
		return b, false
	}
	b = append(b, `{"type":"file","file":{"file_data":`...)
	b = AppendJSONString(b, p.url)
	if p.name != "" {
		b = append(b, `,"filename":`...)
		b = AppendJSONString(b, p.name)
	}
	return append(b, `}}`...), true
}

// appendAnthropicDocument appends a document block
// (https://docs.anthropic.com/en/docs/build-with-claude/pdf-support): a base64 source from a
// data: URL, else a url source.
func appendAnthropicDocument(b []byte, p part) []byte {
	b = append(b, `{"type":"document","source":`...)
	rest, _ := strings.CutPrefix(p.url, "data:")
	if meta, data, ok := strings.Cut(rest, ","); ok && len(rest) < len(p.url) && strings.HasSuffix(meta, ";base64") {
		b = append(b, `{"type":"base64","media_type":`...)
		b = AppendJSONString(b, strings.TrimSuffix(meta, ";base64"))
		b = append(b, `,"data":`...)
		b = AppendJSONString(b, data)
	} else {
		b = append(b, `{"type":"url","url":`...)
		b = AppendJSONString(b, p.url)
	}
	b = append(b, '}')
	if p.name != "" {
		b = append(b, `,"title":`...)
		b = AppendJSONString(b, p.name)
	}
	return append(b, '}')
}

// ---- tools ----

// nsName is a namespace tool's namespace and own name.
type nsName struct{ ns, name string }

// flatName is the name a namespace tool goes upstream under: "<namespace>__<name>" (the
// characters OpenAI and Anthropic allow in tool names: no dots); name alone without one.
func flatName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "__" + name
}

// responsesTool reads one Responses tool (ns: the namespace it is declared in, "" at top
// level): functions become tools; a namespace's tools are flattened (flatName); web_search
// is kept for an upstream that runs it; other hosted tools (file_search, code_interpreter,
// computer use, image_generation, mcp, …) and custom tools are dropped.
func (r *request) responsesTool(t gjson.Result, ns string) {
	switch typ := t.Get("type").Str; typ {
	case "function":
		if t.Get("strict").Type == gjson.True {
			r.drop("tools.strict")
		}
		name := t.Get("name").Str
		if ns != "" {
			if r.ns == nil {
				r.ns = map[string]nsName{}
			}
			r.ns[flatName(ns, name)] = nsName{ns: ns, name: name}
			name = flatName(ns, name)
		}
		r.tools = append(r.tools, tool{name: name, description: t.Get("description").Str, schema: t.Get("parameters").Raw})
	case "namespace":
		name := t.Get("name").Str
		t.Get("tools").ForEach(func(_, nt gjson.Result) bool {
			r.responsesTool(nt, name)
			return true
		})
	case "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11":
		// external_web_access false asks for cached results only; Anthropic's search is live,
		// so granting it would widen what the client allowed: dropped.
		if t.Get("external_web_access").Type == gjson.False {
			r.drop("tools." + typ)
			return
		}
		r.tools = append(r.tools, tool{hosted: "web_search", location: t.Get("user_location").Raw})
	default:
		r.drop("tools." + typ)
	}
}

func (r *request) hasHosted(kind string) bool {
	for _, t := range r.tools {
		if t.hosted == kind {
			return true
		}
	}
	return false
}

// appendAnthropicWebSearch appends Anthropic's web search server tool
// (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool), as
// LiteLLM's map_web_search_tool: user_location's city, region, country and timezone kept.
func appendAnthropicWebSearch(b []byte, t tool) []byte {
	b = append(b, `{"type":"web_search_20250305","name":"web_search"`...)
	if loc := gjson.Parse(t.location); loc.IsObject() {
		b = append(b, `,"user_location":{"type":"approximate"`...)
		for _, k := range [...]string{"city", "region", "country", "timezone"} {
			if v := loc.Get(k); v.Type == gjson.String {
				b = appendKey(b, k)
				b = AppendJSONString(b, v.Str)
			}
		}
		b = append(b, '}')
	}
	return append(b, '}')
}
