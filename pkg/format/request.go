package format

import (
	"strings"

	"github.com/tidwall/gjson"

	"lockstep/pkg/jsonscan"
)

// Request translation goes through a neutral form: a parser per inbound format (chat,
// responses, messages) and a renderer per upstream format (chat, messages). Field mappings
// follow LiteLLM (litellm/llms/anthropic/chat/transformation.py for chat→Anthropic,
// litellm/llms/anthropic/experimental_pass_through/ for Anthropic→chat,
// litellm/responses/litellm_completion_transformation/ for Responses→chat) and the OpenAI and
// Anthropic API references.

type partKind uint8

const (
	partText partKind = iota
	partImage
	partToolUse
	partToolResult
	partDocument // a file (PDF, text): url is a data: URL or an http(s) URL, name its filename
	partThinking // an earlier turn's signed Anthropic thinking block: text, id = signature
)

type part struct {
	kind partKind
	text string // text; tool result content
	url  string // image: http(s) or data: URL
	id   string // tool use id / tool result's tool_use_id
	name string // tool name
	args string // tool use arguments, JSON text
	err  bool   // tool result is an error
	// cache is the part's cache_control object (raw JSON, "" = none): an Anthropic cache
	// breakpoint, carried from chat as LiteLLM carries it.
	cache string
}

type message struct {
	role  string // "user" or "assistant"
	parts []part
}

type tool struct {
	name, description string
	schema            string // JSON schema text; "" = none
	// hosted is a provider-run tool's kind ("web_search"); name, description and schema are
	// then unused. Only an Anthropic upstream runs web_search (its server tool); elsewhere
	// the tool is dropped with the x-lockstep-dropped header.
	hosted string
	// location is web_search's user_location object (raw JSON, "" = none).
	location string
	cache    string // cache_control (raw JSON, "" = none)
}

type toolChoice struct {
	mode string // "", "auto", "any" (required), "none", "tool"
	name string
}

type request struct {
	system      []string
	systemCache []string // cache_control of system[i] (raw JSON, ""), nil when none has one
	cached      int      // cache_control objects carried into the neutral form
	messages    []message
	maxTokens   int64 // 0 = not given
	temperature string
	topP        string
	topK        string
	stop        []string
	stream      bool
	tools       []tool
	choice      toolChoice
	parallel    string // raw JSON boolean or ""
	user        string
	format      outputFormat // structured output; kind "" = free text
	effort      string       // reasoning effort: "low", "medium", "high" ("" = not asked)
	// dropped names what translation left out (request fields, tools, content), in body
	// order: the answer's x-lockstep-dropped header.
	dropped []string
	// ns maps a flattened namespace tool's name to its namespace and own name (Responses
	// "namespace" tools), so that calls are answered under the client's names.
	ns map[string]nsName
	// jsonTool is set by renderMessagesRequest when structured output rides on the forced
	// jsonToolName tool.
	jsonTool bool
}

func (r *request) add(role string, p part) {
	if n := len(r.messages); n > 0 && r.messages[n-1].role == role {
		r.messages[n-1].parts = append(r.messages[n-1].parts, p)
		return
	}
	r.messages = append(r.messages, message{role: role, parts: []part{p}})
}

func numRaw(v gjson.Result) string {
	if v.Type == gjson.Number {
		return v.Raw
	}
	return ""
}

func stopList(v gjson.Result) []string {
	if v.Type == gjson.String {
		return []string{v.Str}
	}
	var out []string
	v.ForEach(func(_, s gjson.Result) bool {
		if s.Type == gjson.String {
			out = append(out, s.Str)
		}
		return true
	})
	return out
}

func parseJSONObject(body []byte) (gjson.Result, error) {
	if jsonscan.Check(body) != nil {
		return gjson.Result{}, BadRequest("request body is not valid JSON")
	}
	root := gjson.Parse(bytesView(body)) // views body: what is read from it aliases it (never modified)
	if !root.IsObject() {
		return gjson.Result{}, BadRequest("request body must be a JSON object")
	}
	return root, nil
}

// parseChatRequest reads an OpenAI chat completion request
// (https://platform.openai.com/docs/api-reference/chat/create).
func parseChatRequest(body []byte) (*request, error) {
	root, err := parseJSONObject(body)
	if err != nil {
		return nil, err
	}
	r := &request{stream: root.Get("stream").Type == gjson.True, user: root.Get("user").Str}
	r.dropUnknown(root, chatFields)
	var perr error
	root.Get("messages").ForEach(func(_, m gjson.Result) bool {
		content := m.Get("content")
		if m.Get("name").Type == gjson.String {
			r.drop("messages.name") // participant names: no Anthropic or Responses equivalent
		}
		switch role := m.Get("role").Str; role {
		case "system", "developer":
			if t := contentText(content); t != "" {
				r.addSystem(t, r.cacheOf(m, content))
			}
		case "user":
			if content.Type == gjson.String {
				r.add("user", part{kind: partText, text: content.Str, cache: r.cacheOf(m)})
				break
			}
			content.ForEach(func(_, p gjson.Result) bool {
				switch p.Get("type").Str {
				case "text":
					r.add("user", part{kind: partText, text: p.Get("text").Str, cache: r.cacheOf(p)})
				case "image_url":
					r.add("user", part{kind: partImage, url: p.Get("image_url.url").Str, cache: r.cacheOf(p)})
				case "file":
					f := p.Get("file")
					if f.Get("file_data").Str == "" {
						perr = BadRequest("messages: file parts by file_id cannot be translated for this provider (the gateway stores no files); send file_data")
						return false
					}
					r.add("user", part{kind: partDocument, url: f.Get("file_data").Str, name: f.Get("filename").Str})
				default:
					perr = BadRequest("messages: content part type %q cannot be translated for this provider", p.Get("type").Str)
					return false
				}
				return true
			})
		case "assistant":
			// LiteLLM's thinking_blocks: Anthropic reasoning with its signature, sent back
			// (Anthropic requires it before tool_use blocks while thinking).
			m.Get("thinking_blocks").ForEach(func(_, tb gjson.Result) bool {
				if tb.Get("type").Str == "thinking" && tb.Get("signature").Str != "" {
					r.add("assistant", part{kind: partThinking, text: tb.Get("thinking").Str, id: tb.Get("signature").Str})
				} else {
					r.drop("messages.thinking_blocks")
				}
				return true
			})
			if !m.Get("thinking_blocks").Exists() && m.Get("reasoning_content").Str != "" {
				r.drop("messages.reasoning_content") // unsigned: Anthropic would refuse it
			}
			if t := contentText(content); t != "" {
				r.add("assistant", part{kind: partText, text: t})
			}
			m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
				r.add("assistant", part{kind: partToolUse, id: tc.Get("id").Str, name: tc.Get("function.name").Str, args: tc.Get("function.arguments").Str})
				return true
			})
		case "tool":
			r.add("user", part{kind: partToolResult, id: m.Get("tool_call_id").Str, text: contentText(content), cache: r.cacheOf(m, content)})
		case "function": // legacy function-call result: no call id to link it to
			r.add("user", part{kind: partText, text: contentText(content)})
		default:
			perr = BadRequest("messages: unknown role %q", role)
		}
		return perr == nil
	})
	if perr != nil {
		return nil, perr
	}
	if v := root.Get("max_completion_tokens"); v.Type == gjson.Number {
		r.maxTokens = v.Int()
	} else if v := root.Get("max_tokens"); v.Type == gjson.Number {
		r.maxTokens = v.Int()
	}
	r.temperature, r.topP = numRaw(root.Get("temperature")), numRaw(root.Get("top_p"))
	r.stop = stopList(root.Get("stop"))
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").Str; typ == "function" {
			f := t.Get("function")
			if f.Get("strict").Type == gjson.True {
				r.drop("tools.strict")
			}
			r.tools = append(r.tools, tool{name: f.Get("name").Str, description: f.Get("description").Str, schema: f.Get("parameters").Raw, cache: r.cacheOf(t, f)})
		} else {
			r.drop("tools." + typ)
		}
		return true
	})
	if ws := root.Get("web_search_options"); ws.IsObject() {
		r.tools = append(r.tools, tool{hosted: "web_search", location: ws.Get("user_location.approximate").Raw})
	}
	r.format = chatResponseFormat(root.Get("response_format"))
	r.effort = effortOf(root.Get("reasoning_effort").Str)
	if n := root.Get("n"); n.Exists() && n.Type != gjson.Null && n.Int() != 1 {
		r.drop("n")
	}
	switch tc := root.Get("tool_choice"); {
	case tc.Type == gjson.String:
		r.choice.mode = map[string]string{"auto": "auto", "required": "any", "none": "none"}[tc.Str]
	case tc.IsObject() && tc.Get("type").Str == "function":
		r.choice = toolChoice{mode: "tool", name: tc.Get("function.name").Str}
	case tc.IsObject():
		r.drop("tool_choice." + tc.Get("type").Str) // allowed_tools, custom: no equivalent
	}
	if p := root.Get("parallel_tool_calls"); p.IsBool() {
		r.parallel = p.Raw
	}
	return r, nil
}

// parseMessagesRequest reads an Anthropic Messages request
// (https://docs.anthropic.com/en/api/messages).
func parseMessagesRequest(body []byte) (*request, error) {
	root, err := parseJSONObject(body)
	if err != nil {
		return nil, err
	}
	r := &request{stream: root.Get("stream").Type == gjson.True, user: root.Get("metadata.user_id").Str}
	r.dropUnknown(root, messagesFields)
	if sys := root.Get("system"); sys.Type == gjson.String {
		if sys.Str != "" {
			r.system = append(r.system, sys.Str)
		}
	} else {
		sys.ForEach(func(_, b gjson.Result) bool {
			if b.Get("type").Str == "text" {
				r.system = append(r.system, b.Get("text").Str)
			}
			return true
		})
	}
	var perr error
	root.Get("messages").ForEach(func(_, m gjson.Result) bool {
		role := m.Get("role").Str
		content := m.Get("content")
		if role == "system" || role == "developer" {
			// A system turn inside messages (Claude Code sends one) joins the system prompt,
			// as LiteLLM's translate_system_message folds every system message.
			if t := contentText(content); t != "" {
				r.system = append(r.system, t)
			}
			r.dropSystemTurnExtras(m)
			return true
		}
		if role != "user" && role != "assistant" {
			perr = BadRequest("messages: unknown role %q", role)
			return false
		}
		if content.Type == gjson.String {
			r.add(role, part{kind: partText, text: content.Str})
			return true
		}
		content.ForEach(func(_, b gjson.Result) bool {
			switch typ := b.Get("type").Str; typ {
			case "text":
				r.add(role, part{kind: partText, text: b.Get("text").Str})
			case "image":
				src := b.Get("source")
				switch src.Get("type").Str {
				case "base64":
					r.add(role, part{kind: partImage, url: "data:" + src.Get("media_type").Str + ";base64," + src.Get("data").Str})
				case "url":
					r.add(role, part{kind: partImage, url: src.Get("url").Str})
				default:
					perr = BadRequest("messages: image source type %q cannot be translated for this provider", src.Get("type").Str)
				}
			case "tool_use":
				args := b.Get("input").Raw
				if args == "" {
					args = "{}"
				}
				r.add(role, part{kind: partToolUse, id: b.Get("id").Str, name: b.Get("name").Str, args: args})
			case "tool_result":
				r.add(role, part{kind: partToolResult, id: b.Get("tool_use_id").Str, text: contentText(b.Get("content")), err: b.Get("is_error").Bool()})
				// Images in a tool result follow it in the user turn (chat tool messages carry
				// text only).
				b.Get("content").ForEach(func(_, c gjson.Result) bool {
					if c.Get("type").Str == "image" {
						if u := anthropicSourceURL(c.Get("source")); u != "" {
							r.add(role, part{kind: partImage, url: u})
						}
					}
					return true
				})
			case "document":
				src := b.Get("source")
				switch src.Get("type").Str {
				case "base64", "url":
					r.add(role, part{kind: partDocument, url: anthropicSourceURL(src), name: b.Get("title").Str})
				case "text":
					r.add(role, part{kind: partText, text: src.Get("data").Str})
				default:
					perr = BadRequest("messages: document source type %q cannot be translated for this provider", src.Get("type").Str)
				}
			case "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result":
				// an Anthropic server tool's earlier turn: nothing an OpenAI-format model can read
				r.drop("messages.content." + typ)
			case "thinking", "redacted_thinking":
				// Reasoning from an earlier Anthropic turn has no chat equivalent (LiteLLM drops it too).
				r.drop("messages.content." + typ)
			default:
				perr = BadRequest("messages: content block type %q cannot be translated for this provider", typ)
			}
			return perr == nil
		})
		return perr == nil
	})
	if perr != nil {
		return nil, perr
	}
	r.maxTokens = root.Get("max_tokens").Int()
	r.temperature, r.topP, r.topK = numRaw(root.Get("temperature")), numRaw(root.Get("top_p")), numRaw(root.Get("top_k"))
	r.stop = stopList(root.Get("stop_sequences"))
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").Str; typ != "" && typ != "custom" {
			// A server tool (web_search_20250305, code_execution_…, bash_…, …) runs at
			// Anthropic only: an OpenAI-format upstream has none (LiteLLM drops it too).
			r.drop("tools." + typ)
			return true
		}
		r.tools = append(r.tools, tool{name: t.Get("name").Str, description: t.Get("description").Str, schema: t.Get("input_schema").Raw})
		return true
	})
	r.format = messagesOutputFormat(root)
	if oc := root.Get("output_config"); oc.IsObject() {
		oc.ForEach(func(k, _ gjson.Result) bool {
			if k.Str != "format" && k.Str != "effort" {
				r.drop("output_config." + k.Str)
			}
			return true
		})
	}
	r.effort = effortOfBudget(root.Get("thinking"))
	if e := root.Get("output_config.effort").Str; r.effort == "" && e != "" {
		r.effort = effortOfOutputConfig(e)
	}
	if tc := root.Get("tool_choice"); tc.IsObject() {
		r.choice = toolChoice{mode: tc.Get("type").Str, name: tc.Get("name").Str}
		if tc.Get("disable_parallel_tool_use").Bool() {
			r.parallel = "false"
		}
	}
	return r, nil
}

// parseResponsesRequest reads an OpenAI Responses request
// (https://platform.openai.com/docs/api-reference/responses/create) for an upstream that has no
// Responses API. State kept by OpenAI (previous_response_id, conversation) cannot be honoured.
func parseResponsesRequest(body []byte) (*request, error) {
	root, err := parseJSONObject(body)
	if err != nil {
		return nil, err
	}
	for _, f := range [...]string{"previous_response_id", "conversation"} {
		if v := root.Get(f); v.Exists() && v.Type != gjson.Null {
			return nil, BadRequest("%s is not supported by this model's provider (the gateway does not store responses)", f)
		}
	}
	r := &request{stream: root.Get("stream").Type == gjson.True, user: root.Get("user").Str}
	r.dropUnknown(root, responsesFields)
	if ins := root.Get("instructions"); ins.Type == gjson.String && ins.Str != "" {
		r.system = append(r.system, ins.Str)
	}
	var perr error
	input := root.Get("input")
	if input.Type == gjson.String {
		r.add("user", part{kind: partText, text: input.Str})
	} else {
		input.ForEach(func(_, it gjson.Result) bool {
			typ := it.Get("type").Str
			if typ == "" && it.Get("role").Exists() {
				typ = "message"
			}
			switch typ {
			case "message":
				role := it.Get("role").Str
				content := it.Get("content")
				if role == "system" || role == "developer" {
					if t := contentText(content); t != "" {
						r.system = append(r.system, t)
					}
					return true
				}
				if role != "user" && role != "assistant" {
					perr = BadRequest("input: unknown role %q", role)
					return false
				}
				if content.Type == gjson.String {
					r.add(role, part{kind: partText, text: content.Str})
					return true
				}
				content.ForEach(func(_, c gjson.Result) bool {
					switch ct := c.Get("type").Str; ct {
					case "input_text", "output_text":
						r.add(role, part{kind: partText, text: c.Get("text").Str})
					case "refusal":
						r.add(role, part{kind: partText, text: c.Get("refusal").Str})
					case "input_file":
						u := c.Get("file_data").Str
						if u == "" {
							u = c.Get("file_url").Str
						}
						if u == "" {
							perr = BadRequest("input: input_file by file_id cannot be translated for this provider (the gateway stores no files); send file_data or file_url")
							return false
						}
						r.add(role, part{kind: partDocument, url: u, name: c.Get("filename").Str})
					case "input_image":
						u := c.Get("image_url").Str
						if u == "" {
							perr = BadRequest("input: input_image by file_id cannot be translated for this provider")
							return false
						}
						r.add(role, part{kind: partImage, url: u})
					default:
						perr = BadRequest("input: content type %q cannot be translated for this provider", ct)
						return false
					}
					return true
				})
			case "function_call":
				r.add("assistant", part{kind: partToolUse, id: it.Get("call_id").Str, name: flatName(it.Get("namespace").Str, it.Get("name").Str), args: it.Get("arguments").Str})
			case "function_call_output":
				out := it.Get("output")
				text := out.Str
				if out.Type != gjson.String {
					text = contentText(out)
				}
				r.add("user", part{kind: partToolResult, id: it.Get("call_id").Str, text: text})
			case "reasoning":
				// A reasoning item this gateway made from Anthropic thinking goes back as that
				// signed thinking block; OpenAI's own have no equivalent upstream.
				if sig, ok := strings.CutPrefix(it.Get("encrypted_content").Str, thinkingSigPrefix); ok && sig != "" {
					var text strings.Builder
					it.Get("summary").ForEach(func(_, s gjson.Result) bool {
						text.WriteString(s.Get("text").Str)
						return true
					})
					r.add("assistant", part{kind: partThinking, text: text.String(), id: sig})
				} else {
					r.drop("input.reasoning")
				}
			default:
				perr = BadRequest("input: item type %q cannot be translated for this provider", typ)
			}
			return perr == nil
		})
	}
	if perr != nil {
		return nil, perr
	}
	r.maxTokens = root.Get("max_output_tokens").Int()
	r.temperature, r.topP = numRaw(root.Get("temperature")), numRaw(root.Get("top_p"))
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		r.responsesTool(t, "")
		return true
	})
	switch tc := root.Get("tool_choice"); {
	case tc.Type == gjson.String:
		r.choice.mode = map[string]string{"auto": "auto", "required": "any", "none": "none"}[tc.Str]
	case tc.IsObject() && tc.Get("type").Str == "function":
		r.choice = toolChoice{mode: "tool", name: flatName(tc.Get("namespace").Str, tc.Get("name").Str)}
	case tc.IsObject() && strings.HasPrefix(tc.Get("type").Str, "web_search") && r.hasHosted("web_search"):
		r.choice = toolChoice{mode: "tool", name: "web_search"} // Anthropic's server tool's name
	case tc.IsObject():
		r.drop("tool_choice." + tc.Get("type").Str)
	}
	r.format = responsesTextFormat(root.Get("text"))
	r.effort = effortOf(root.Get("reasoning.effort").Str)
	r.dropMembers("text", root.Get("text"), "format")
	r.dropMembers("reasoning", root.Get("reasoning"), "effort")
	if p := root.Get("parallel_tool_calls"); p.IsBool() {
		r.parallel = p.Raw
	}
	return r, nil
}
