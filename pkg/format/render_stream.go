package format

import (
	"strconv"
	"strings"
)

// renderer writes streamed output in an inbound  Decoders of upstream streams (and the
// mock) call start once, then text/toolStart/toolArgs in output order, then finish once, or
// fail. Each method appends complete SSE frames to b and returns it.
type renderer interface {
	start(b []byte, id, model string, u usage) []byte
	text(b []byte, delta string) []byte
	toolStart(b []byte, id, name string) []byte
	toolArgs(b []byte, delta string) []byte
	finish(b []byte, stop stopReason, stopSeq string, u usage) []byte
	fail(b []byte, status int, msg string) []byte
}

func newRenderer(f Format, includeUsage bool) renderer {
	switch f {
	case FormatMessages:
		return &messagesRenderer{}
	case FormatResponses:
		return &responsesRenderer{}
	case FormatCompletions:
		return &completionsRenderer{includeUsage: includeUsage}
	}
	return &chatRenderer{includeUsage: includeUsage}
}

// ---- OpenAI text_completion chunks (https://platform.openai.com/docs/api-reference/completions/create) ----

// completionsRenderer streams the legacy completions format (mock answers only: a real
// completions upstream is passed through). Tool calls have no place in it and are dropped.
type completionsRenderer struct {
	includeUsage bool
	head         []byte // `data: {"id":…,"object":"text_completion","created":…,"model":…`
}

func (r *completionsRenderer) start(b []byte, id, model string, _ usage) []byte {
	h := append([]byte(nil), `data: {"id":`...)
	h = AppendJSONString(h, id)
	h = append(h, `,"object":"text_completion","created":`...)
	h = AppendInt(h, now())
	h = append(h, `,"model":`...)
	r.head = AppendJSONString(h, model)
	return b
}

func (r *completionsRenderer) text(b []byte, delta string) []byte {
	b = append(b, r.head...)
	b = append(b, `,"choices":[{"text":`...)
	b = AppendJSONString(b, delta)
	return append(b, `,"index":0,"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
}

func (r *completionsRenderer) toolStart(b []byte, _, _ string) []byte { return b }
func (r *completionsRenderer) toolArgs(b []byte, _ string) []byte     { return b }

func (r *completionsRenderer) finish(b []byte, stop stopReason, _ string, u usage) []byte {
	b = append(b, r.head...)
	b = append(b, `,"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":`...)
	b = AppendJSONString(b, stop.chatFinish())
	b = append(b, `}]`...)
	if r.includeUsage {
		b = append(b, `,"usage":`...)
		b = append(b, marshal(chatUsage(u))...)
	}
	b = append(b, "}\n\n"...)
	return append(b, "data: [DONE]\n\n"...)
}

func (r *completionsRenderer) fail(b []byte, status int, msg string) []byte {
	return AppendErrorEvent(b, FormatChat, status, "", msg)
}

// ---- OpenAI chat.completion.chunk (https://platform.openai.com/docs/api-reference/chat-streaming) ----

type chatRenderer struct {
	includeUsage bool
	prefix       []byte // `data: {"id":…,"choices":[{"index":0,"delta":`
	head         []byte // `data: {"id":…,"model":…` (for the usage chunk)
	tools        int    // tool calls started
}

const chatChunkTail = `,"logprobs":null,"finish_reason":null}]}` + "\n\n"

func (r *chatRenderer) start(b []byte, id, model string, _ usage) []byte {
	h := make([]byte, 0, 96+len(id)+len(model))
	h = append(h, `data: {"id":`...)
	h = AppendJSONString(h, id)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = AppendInt(h, now())
	h = append(h, `,"model":`...)
	h = AppendJSONString(h, model)
	r.head = h
	r.prefix = append(h[:len(h):len(h)], `,"choices":[{"index":0,"delta":`...)
	b = append(b, r.prefix...)
	b = append(b, `{"role":"assistant","content":""}`...)
	return append(b, chatChunkTail...)
}

func (r *chatRenderer) text(b []byte, delta string) []byte {
	b = append(b, r.prefix...)
	b = append(b, `{"content":`...)
	b = AppendJSONString(b, delta)
	b = append(b, '}')
	return append(b, chatChunkTail...)
}

func (r *chatRenderer) toolStart(b []byte, id, name string) []byte {
	b = append(b, r.prefix...)
	b = append(b, `{"tool_calls":[{"index":`...)
	b = AppendInt(b, int64(r.tools))
	b = append(b, `,"id":`...)
	b = AppendJSONString(b, id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = AppendJSONString(b, name)
	b = append(b, `,"arguments":""}}]}`...)
	r.tools++
	return append(b, chatChunkTail...)
}

func (r *chatRenderer) toolArgs(b []byte, delta string) []byte {
	b = append(b, r.prefix...)
	b = append(b, `{"tool_calls":[{"index":`...)
	b = AppendInt(b, int64(max(r.tools-1, 0)))
	b = append(b, `,"function":{"arguments":`...)
	b = AppendJSONString(b, delta)
	b = append(b, `}}]}`...)
	return append(b, chatChunkTail...)
}

// thinking streams reasoning as LiteLLM does: delta.reasoning_content.
func (r *chatRenderer) thinking(b []byte, delta string) []byte {
	b = append(b, r.prefix...)
	b = append(b, `{"reasoning_content":`...)
	b = AppendJSONString(b, delta)
	b = append(b, '}')
	return append(b, chatChunkTail...)
}

// signature streams a thinking block's signature as LiteLLM's delta.thinking_blocks.
func (r *chatRenderer) signature(b []byte, sig string) []byte {
	b = append(b, r.prefix...)
	b = append(b, `{"thinking_blocks":[{"type":"thinking","thinking":"","signature":`...)
	b = AppendJSONString(b, sig)
	b = append(b, `}]}`...)
	return append(b, chatChunkTail...)
}

func (r *chatRenderer) finish(b []byte, stop stopReason, _ string, u usage) []byte {
	b = append(b, r.prefix...)
	b = append(b, `{},"logprobs":null,"finish_reason":`...)
	b = AppendJSONString(b, stop.chatFinish())
	b = append(b, "}]}\n\n"...)
	if r.includeUsage {
		b = append(b, r.head...)
		b = append(b, `,"choices":[],"usage":`...)
		b = append(b, marshal(chatUsage(u))...)
		b = append(b, "}\n\n"...)
	}
	return append(b, "data: [DONE]\n\n"...)
}

func (r *chatRenderer) fail(b []byte, status int, msg string) []byte {
	return AppendErrorEvent(b, FormatChat, status, "", msg)
}

// ---- Anthropic Messages events (https://docs.anthropic.com/en/docs/build-with-claude/streaming) ----

type messagesRenderer struct {
	open    bool // a content block is open
	openIsT bool // the open block is text
	openTh  bool // the open block is thinking
	index   int  // index of the open block (or of the next one when none is open)
	started bool
}

func (r *messagesRenderer) start(b []byte, id, model string, u usage) []byte {
	r.started = true
	b = AppendEvent(b, "message_start")
	b = append(b, `{"type":"message_start","message":{"id":`...)
	b = AppendJSONString(b, id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = AppendJSONString(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = AppendInt(b, u.anthropicInput())
	b = append(b, `,"output_tokens":0}}}`+"\n\n"...)
	return b
}

func (r *messagesRenderer) closeBlock(b []byte) []byte {
	if !r.open {
		return b
	}
	b = AppendEvent(b, "content_block_stop")
	b = append(b, `{"type":"content_block_stop","index":`...)
	b = AppendInt(b, int64(r.index))
	b = append(b, "}\n\n"...)
	r.open = false
	r.index++
	return b
}

func (r *messagesRenderer) text(b []byte, delta string) []byte {
	if !r.open || !r.openIsT {
		b = r.closeBlock(b)
		b = AppendEvent(b, "content_block_start")
		b = append(b, `{"type":"content_block_start","index":`...)
		b = AppendInt(b, int64(r.index))
		b = append(b, `,"content_block":{"type":"text","text":""}}`+"\n\n"...)
		r.open, r.openIsT, r.openTh = true, true, false
	}
	b = AppendEvent(b, "content_block_delta")
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = AppendInt(b, int64(r.index))
	b = append(b, `,"delta":{"type":"text_delta","text":`...)
	b = AppendJSONString(b, delta)
	return append(b, "}}\n\n"...)
}

func (r *messagesRenderer) toolStart(b []byte, id, name string) []byte {
	b = r.closeBlock(b)
	b = AppendEvent(b, "content_block_start")
	b = append(b, `{"type":"content_block_start","index":`...)
	b = AppendInt(b, int64(r.index))
	b = append(b, `,"content_block":{"type":"tool_use","id":`...)
	b = AppendJSONString(b, id)
	b = append(b, `,"name":`...)
	b = AppendJSONString(b, name)
	b = append(b, `,"input":{}}}`+"\n\n"...)
	r.open, r.openIsT, r.openTh = true, false, false
	return b
}

// thinking streams reasoning as a thinking block (thinking_delta events).
func (r *messagesRenderer) thinking(b []byte, delta string) []byte {
	if !r.open || !r.openTh {
		b = r.closeBlock(b)
		b = AppendEvent(b, "content_block_start")
		b = append(b, `{"type":"content_block_start","index":`...)
		b = AppendInt(b, int64(r.index))
		b = append(b, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`+"\n\n"...)
		r.open, r.openIsT, r.openTh = true, false, true
	}
	b = AppendEvent(b, "content_block_delta")
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = AppendInt(b, int64(r.index))
	b = append(b, `,"delta":{"type":"thinking_delta","thinking":`...)
	b = AppendJSONString(b, delta)
	return append(b, "}}\n\n"...)
}

// signature ends the open thinking block's reasoning with its signature_delta.
func (r *messagesRenderer) signature(b []byte, sig string) []byte {
	if !r.open || !r.openTh {
		return b
	}
	b = AppendEvent(b, "content_block_delta")
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = AppendInt(b, int64(r.index))
	b = append(b, `,"delta":{"type":"signature_delta","signature":`...)
	b = AppendJSONString(b, sig)
	return append(b, "}}\n\n"...)
}

func (r *messagesRenderer) toolArgs(b []byte, delta string) []byte {
	if !r.open || r.openIsT || r.openTh {
		return b // arguments without a started call: nothing to attach them to
	}
	b = AppendEvent(b, "content_block_delta")
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = AppendInt(b, int64(r.index))
	b = append(b, `,"delta":{"type":"input_json_delta","partial_json":`...)
	b = AppendJSONString(b, delta)
	return append(b, "}}\n\n"...)
}

func (r *messagesRenderer) finish(b []byte, stop stopReason, stopSeq string, u usage) []byte {
	b = r.closeBlock(b)
	b = AppendEvent(b, "message_delta")
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":`...)
	b = AppendJSONString(b, stop.anthropicStop())
	b = append(b, `,"stop_sequence":`...)
	if stopSeq != "" {
		b = AppendJSONString(b, stopSeq)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `},"usage":{"input_tokens":`...)
	b = AppendInt(b, u.anthropicInput())
	b = append(b, `,"output_tokens":`...)
	b = AppendInt(b, u.out)
	if u.cacheRead > 0 || u.cacheWrite > 0 {
		b = append(b, `,"cache_read_input_tokens":`...)
		b = AppendInt(b, u.cacheRead)
		b = append(b, `,"cache_creation_input_tokens":`...)
		b = AppendInt(b, u.cacheWrite)
	}
	b = append(b, "}}\n\n"...)
	b = AppendEvent(b, "message_stop")
	return append(b, `{"type":"message_stop"}`+"\n\n"...)
}

func (r *messagesRenderer) fail(b []byte, status int, msg string) []byte {
	return AppendErrorEvent(b, FormatMessages, status, "", msg)
}

// ---- OpenAI Responses events (https://platform.openai.com/docs/api-reference/responses-streaming) ----

type responsesRenderer struct {
	seq     int64
	base    string // id stem
	model   string
	created int64
	blocks  []block // output so far; the last one is open when open is true
	open    bool
	sb      strings.Builder // text or arguments of the open block
}

// event appends `event: <typ>\ndata: {"type":"<typ>","sequence_number":N` — the caller
// appends the remaining members and "}\n\n".
func (r *responsesRenderer) event(b []byte, typ string) []byte {
	b = AppendEvent(b, typ)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, r.seq, 10)
	r.seq++
	return b
}

func (r *responsesRenderer) itemHead(b []byte) []byte {
	i := len(r.blocks) - 1
	b = append(b, `,"item_id":`...)
	if r.blocks[i].think {
		b = AppendJSONString(b, itemID("rs", r.base, i))
	} else if r.blocks[i].tool {
		b = AppendJSONString(b, itemID("fc", r.base, i))
	} else {
		b = AppendJSONString(b, itemID("msg", r.base, i))
	}
	b = append(b, `,"output_index":`...)
	return AppendInt(b, int64(i))
}

func (r *responsesRenderer) start(b []byte, id, model string, _ usage) []byte {
	r.base, r.model, r.created = responsesBase(id), model, now()
	o := newRespObject("resp_"+r.base, model, r.created, "in_progress")
	obj := marshal(o)
	b = r.event(b, "response.created")
	b = append(b, `,"response":`...)
	b = append(b, obj...)
	b = append(b, "}\n\n"...)
	b = r.event(b, "response.in_progress")
	b = append(b, `,"response":`...)
	b = append(b, obj...)
	return append(b, "}\n\n"...)
}

func (r *responsesRenderer) addItem(b []byte, blk block) []byte {
	b = r.closeItem(b)
	r.blocks = append(r.blocks, blk)
	r.open = true
	r.sb.Reset()
	i := len(r.blocks) - 1
	item := responsesItem(blk, r.base, i, "in_progress")
	if blk.think {
		item.Summary = []respSummary{}
	} else if !blk.tool {
		item.Content = []respTextPart{}
	} else {
		empty := ""
		item.Arguments = &empty
	}
	b = r.event(b, "response.output_item.added")
	b = append(b, `,"output_index":`...)
	b = AppendInt(b, int64(i))
	b = append(b, `,"item":`...)
	b = append(b, marshal(item)...)
	b = append(b, "}\n\n"...)
	if blk.think {
		b = r.event(b, "response.reasoning_summary_part.added")
		b = r.itemHead(b)
		b = append(b, `,"summary_index":0,"part":{"type":"summary_text","text":""}}`+"\n\n"...)
	} else if !blk.tool {
		b = r.event(b, "response.content_part.added")
		b = r.itemHead(b)
		b = append(b, `,"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}}`+"\n\n"...)
	}
	return b
}

func (r *responsesRenderer) closeItem(b []byte) []byte {
	if !r.open {
		return b
	}
	r.open = false
	i := len(r.blocks) - 1
	blk := &r.blocks[i]
	if blk.think {
		blk.text = r.sb.String()
		b = r.event(b, "response.reasoning_summary_text.done")
		b = r.itemHead(b)
		b = append(b, `,"summary_index":0,"text":`...)
		b = AppendJSONString(b, blk.text)
		b = append(b, "}\n\n"...)
		b = r.event(b, "response.reasoning_summary_part.done")
		b = r.itemHead(b)
		b = append(b, `,"summary_index":0,"part":{"type":"summary_text","text":`...)
		b = AppendJSONString(b, blk.text)
		b = append(b, "}}\n\n"...)
	} else if blk.tool {
		blk.args = r.sb.String()
		b = r.event(b, "response.function_call_arguments.done")
		b = r.itemHead(b)
		b = append(b, `,"arguments":`...)
		b = AppendJSONString(b, blk.args)
		b = append(b, "}\n\n"...)
	} else {
		blk.text = r.sb.String()
		b = r.event(b, "response.output_text.done")
		b = r.itemHead(b)
		b = append(b, `,"content_index":0,"text":`...)
		b = AppendJSONString(b, blk.text)
		b = append(b, `,"logprobs":[]}`+"\n\n"...)
		b = r.event(b, "response.content_part.done")
		b = r.itemHead(b)
		b = append(b, `,"content_index":0,"part":{"type":"output_text","text":`...)
		b = AppendJSONString(b, blk.text)
		b = append(b, `,"annotations":[],"logprobs":[]}}`+"\n\n"...)
	}
	item := responsesItem(*blk, r.base, i, "completed")
	b = r.event(b, "response.output_item.done")
	b = append(b, `,"output_index":`...)
	b = AppendInt(b, int64(i))
	b = append(b, `,"item":`...)
	b = append(b, marshal(item)...)
	return append(b, "}\n\n"...)
}

// thinking streams reasoning as a reasoning item's summary text.
func (r *responsesRenderer) thinking(b []byte, delta string) []byte {
	if !r.open || !r.blocks[len(r.blocks)-1].think {
		b = r.addItem(b, block{think: true})
	}
	r.sb.WriteString(delta)
	b = r.event(b, "response.reasoning_summary_text.delta")
	b = r.itemHead(b)
	b = append(b, `,"summary_index":0,"delta":`...)
	b = AppendJSONString(b, delta)
	return append(b, "}\n\n"...)
}

// signature keeps the open reasoning item's signature for its encrypted_content.
func (r *responsesRenderer) signature(b []byte, sig string) []byte {
	if r.open && r.blocks[len(r.blocks)-1].think {
		r.blocks[len(r.blocks)-1].sig += sig
	}
	return b
}

func (r *responsesRenderer) text(b []byte, delta string) []byte {
	if !r.open || r.blocks[len(r.blocks)-1].tool || r.blocks[len(r.blocks)-1].think {
		b = r.addItem(b, block{})
	}
	r.sb.WriteString(delta)
	b = r.event(b, "response.output_text.delta")
	b = r.itemHead(b)
	b = append(b, `,"content_index":0,"delta":`...)
	b = AppendJSONString(b, delta)
	return append(b, `,"logprobs":[]}`+"\n\n"...)
}

func (r *responsesRenderer) toolStart(b []byte, id, name string) []byte {
	return r.addItem(b, block{tool: true, id: id, name: name})
}

func (r *responsesRenderer) toolArgs(b []byte, delta string) []byte {
	if !r.open || !r.blocks[len(r.blocks)-1].tool || r.blocks[len(r.blocks)-1].think {
		return b
	}
	r.sb.WriteString(delta)
	b = r.event(b, "response.function_call_arguments.delta")
	b = r.itemHead(b)
	b = append(b, `,"delta":`...)
	b = AppendJSONString(b, delta)
	return append(b, "}\n\n"...)
}

func (r *responsesRenderer) finish(b []byte, stop stopReason, _ string, u usage) []byte {
	b = r.closeItem(b)
	status, inc := responsesStatus(stop)
	o := newRespObject("resp_"+r.base, r.model, r.created, status)
	o.IncompleteDetails = inc
	o.Output = responsesItems(r.blocks, r.base, "completed")
	o.Usage = respUsageOf(u)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	b = r.event(b, typ)
	b = append(b, `,"response":`...)
	b = append(b, marshal(o)...)
	return append(b, "}\n\n"...)
}

func (r *responsesRenderer) fail(b []byte, status int, msg string) []byte {
	b = r.event(b, "error")
	b = append(b, `,"code":`...)
	b = AppendJSONString(b, strconv.Itoa(status))
	b = append(b, `,"message":`...)
	b = AppendJSONString(b, msg)
	return append(b, `,"param":null}`+"\n\n"...)
}
