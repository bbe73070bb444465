package format

import (
	"bytes"
	"strconv"

	"github.com/tidwall/gjson"

	"lockstep/pkg/jsonscan"
)

// Text locations: the one description, per format, of every text a client or a model wrote,
// in both directions. Guardrails (pre_call, during_call, post_call, stream masking) see texts
// only through [MapRequestText], [MapResponseText] and [MapStreamText]; nothing else walks a
// body for text (API.md "Security rules": guardrails see every text in every format and both
// directions).
//
// Requests (what a client sends, [MapRequestText]):
//
//	chat:       messages[].content (a string, or its parts of type "text": .text);
//	            messages[].refusal; messages[].tool_calls[].function.arguments and the legacy
//	            messages[].function_call.arguments (JSON text: see "Arguments" below);
//	            tool and function role messages are covered by .content; prediction.content
//	responses:  instructions; input (a string); input[] items: message content (a string, or
//	            its input_text / output_text parts' .text and refusal parts' .refusal);
//	            function_call .arguments (JSON text); function_call_output .output (a string,
//	            or its input_text parts); custom_tool_call .input; custom_tool_call_output .output
//	messages:   system (a string, or its text blocks); messages[].content (a string, or its
//	            blocks: text .text, tool_use .input (a JSON value: every string in it),
//	            tool_result .content (a string, or its text blocks))
//	embeddings, moderations, speech: input (a string, the strings of an array, or the
//	            "text" of moderation input objects; token arrays carry no text); speech
//	            instructions (the voice direction)
//	completions, images: prompt (a string or the strings of an array); completions suffix
//	transcriptions: the multipart form field "prompt" (the audio file is not text); the body
//	            is rebuilt with the edited field only, every other part byte for byte
//
// Non-streamed answers ([MapResponseText]), every choice:
//
//	chat:       choices[].message: content (string or text parts), refusal,
//	            tool_calls[].function.arguments, function_call.arguments
//	responses:  output[] items: message content output_text .text and refusal .refusal,
//	            function_call .arguments, custom_tool_call .input
//	messages:   content[] blocks: text .text, tool_use .input
//	completions: choices[].text
//	transcriptions: text, segments[].text and words[].word (json, verbose_json); the whole
//	            body when it is not JSON (response_format text, srt, vtt)
//	images:     data[].revised_prompt
//	embeddings, moderations, speech: none (vectors, scores, audio)
//
// Streamed answers ([MapStreamText]), every frame that carries or repeats text:
//
//	chat:       choices[] (by their "index"): delta.content, delta.refusal,
//	            delta.tool_calls[].function.arguments (argument fragments)
//	completions: choices[] (by their "index"): text
//	responses:  response.output_text.delta (.delta) and .done (.text); response.refusal.delta
//	            and .done; response.content_part.added/.done (.part); response.output_item.added
//	            and .done (.item, as an output item above);
//	            response.function_call_arguments.delta (.delta, fragments) and .done (.arguments);
//	            response.created / in_progress / completed / incomplete / failed (.response.output)
//	messages:   message_start (.message.content); content_block_start (.content_block: text,
//	            tool_use input); content_block_delta text_delta (.text) and input_json_delta
//	            (.partial_json, fragments)
//
// A2A: the text parts of an A2A message are joined into the user message of an OpenAI chat
// request, and the agent's reply is the text of the chat answer, so both directions are chat
// locations above (data and file parts are never sent to a model).
//
// Arguments: tool-call arguments are JSON text inside a JSON string. When they parse, every
// string inside them (object keys and values) is a text of its own and a replacement keeps the
// arguments valid JSON; when they do not, the whole argument text is one text. Anthropic's
// tool_use.input is a JSON value in the body itself: every string in it is a text. Numbers and
// booleans are not texts. Streamed argument fragments are raw JSON source (Text.JSON).
//
// Not texts: thinking and redacted_thinking blocks (signed by the upstream: any change makes
// the next turn fail), images, audio, files, ids, names.

// messagesTextChannel is the one Channel of every text block of a messages stream: the text
// blocks of one answer are matched as one text, so a card number split by a tool_use block
// (a translated chat stream opens a new text block after each tool call) is still one match.
// A tool_use block's input keeps a channel of its own ("block N").
const messagesTextChannel = "text"

// Text is one text location handed to a [TextFunc].
type Text struct {
	// Value is the text. It may alias the walked bytes: clone it to keep it after fn returns.
	Value string
	// Delta marks a piece of a streamed text: joined with the earlier pieces of the same
	// Channel (in order) it gives the text so far. A complete text (a request text, a
	// non-streamed answer, a stream's *.done or response.completed repeat) has Delta false.
	Delta bool
	// Channel names the streamed text a delta belongs to, unique within one stream, e.g.
	// "choice 1" (chat content of choice 1), "choice 0 tool 2" (its third tool call's
	// arguments), "block 3" (messages tool_use block 3's input; every text block is "text"), "item 0 part 0", "item 1 arguments"
	// (responses). "" when Delta is false.
	Channel string
	// JSON marks a fragment of JSON source (a streamed tool-call arguments delta): a
	// replacement must not add unescaped quotes or backslashes.
	JSON bool
	// Answer marks the assistant's reply text proper (content of the first choice, text
	// blocks, output_text): what [Event.Text] and [Response.Text] carry.
	Answer bool
}

// TextFunc returns the replacement of a text (the text itself to keep it) or an error, which
// stops the walk and is returned as is.
type TextFunc func(Text) (string, error)

// MapRequestText rewrites every text a client sent in a request of format in (see the text
// locations above) through fn and returns the new body; the body itself is returned when fn
// changed nothing. Only the string values change; everything else stays byte for byte. An
// error from fn is returned as is; an invalid body is a *RequestError. Used by pre_call
// (rewrite) and during_call (check only) guardrails.
func MapRequestText(in Format, body []byte, fn TextFunc) ([]byte, error) {
	if in.Multipart() {
		return mapMultipartText(body, fn)
	}
	if jsonscan.Check(body) != nil {
		return nil, BadRequest("request body is not valid JSON")
	}
	w := walker{fn: fn}
	root := gjson.Parse(bytesView(body))
	switch in {
	case FormatChat:
		root.Get("messages").ForEach(func(_, m gjson.Result) bool {
			w.chatMessage(m, false)
			return w.err == nil
		})
		w.content(root.Get("prediction.content"), false)
	case FormatResponses:
		w.text(root.Get("instructions"), false)
		input := root.Get("input")
		if input.Type == gjson.String {
			w.text(input, false)
			break
		}
		input.ForEach(func(_, it gjson.Result) bool {
			w.responsesItem(it, false)
			return w.err == nil
		})
	case FormatMessages:
		w.content(root.Get("system"), false)
		root.Get("messages").ForEach(func(_, m gjson.Result) bool {
			w.content(m.Get("content"), false)
			return w.err == nil
		})
	case FormatEmbeddings, FormatModerations, FormatSpeech, FormatCompletions, FormatImages:
		field := "input"
		if in == FormatCompletions || in == FormatImages {
			field = "prompt"
		}
		switch in {
		case FormatSpeech:
			w.text(root.Get("instructions"), false)
		case FormatCompletions:
			w.text(root.Get("suffix"), false)
		}
		input := root.Get(field)
		if input.Type == gjson.String {
			w.text(input, false)
			break
		}
		input.ForEach(func(_, v gjson.Result) bool {
			if v.IsObject() { // moderations: [{"type": "text", "text": …}, {"type": "image_url", …}]
				w.text(v.Get("text"), false)
			} else {
				w.text(v, false)
			}
			return w.err == nil
		})
	}
	if w.err != nil {
		return nil, w.err
	}
	return ApplyEdits(body, w.edits), nil
}

// MapResponseText rewrites every text of a non-streamed answer in format f (every choice, tool
// calls included; see the text locations above) through fn. The body itself is returned when
// nothing changed, or when it is not JSON (nothing to walk; but a transcription that is not
// JSON — response_format text, srt or vtt — is one text); an error from fn is returned as is.
// Used by post_call guardrails.
func MapResponseText(f Format, body []byte, fn TextFunc) ([]byte, error) {
	if f == FormatTranscriptions && len(body) > 0 && (!ValidJSON(body) || !gjson.ParseBytes(body).IsObject()) {
		out, err := fn(Text{Value: string(body), Answer: true})
		if err != nil {
			return nil, err
		}
		if out == string(body) {
			return body, nil
		}
		return []byte(out), nil
	}
	if !ValidJSON(body) {
		return body, nil
	}
	w := walker{fn: fn}
	w.response(f, gjson.Parse(bytesView(body)))
	if w.err != nil {
		return nil, w.err
	}
	return ApplyEdits(body, w.edits), nil
}

// MapStreamText rewrites every text carried or repeated by the SSE frames in data (one or more
// complete frames in format f, as [Event.Data] holds them) through fn; see the text locations
// above. A frame is kept byte for byte unless one of its texts changed (it is then re-written
// as "event: <name>" (when it had one) and one "data:" line); data itself is returned when
// nothing changed. Frames that are not JSON ("[DONE]", comments) are kept. An error from fn is
// returned as is.
func MapStreamText(f Format, data []byte, fn TextFunc) ([]byte, error) {
	var out []byte // nil until a frame changes
	for pos := 0; pos < len(data); {
		n := SSEFrameLen(data[pos:])
		frame := data[pos : pos+n]
		nf, err := mapFrame(f, frame, fn)
		if err != nil {
			return nil, err
		}
		if nf != nil && out == nil {
			out = append(make([]byte, 0, len(data)+64), data[:pos]...)
		}
		if out != nil {
			if nf == nil {
				nf = frame
			}
			out = append(out, nf...)
		}
		pos += n
	}
	if out == nil {
		return data, nil
	}
	return out, nil
}

// SSEFrameLen is the length of the first SSE frame of b, its terminating blank line included.
func SSEFrameLen(b []byte) int {
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return len(b)
		}
		line := bytes.TrimRight(b[i:i+j], "\r")
		i += j + 1
		if len(line) == 0 {
			return i
		}
	}
	return len(b)
}

// mapFrame walks one SSE frame; nil when it is unchanged.
func mapFrame(f Format, frame []byte, fn TextFunc) ([]byte, error) {
	var event, data []byte
	lines := 0
	for rest := frame; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		line = bytes.TrimRight(line, "\r")
		switch {
		case bytes.HasPrefix(line, []byte("event:")):
			event = bytes.TrimSpace(line[len("event:"):])
		case bytes.HasPrefix(line, []byte("data:")):
			v := line[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if lines == 0 {
				data = v
			} else {
				if lines == 1 {
					data = append([]byte(nil), data...)
				}
				data = append(append(data, '\n'), v...)
			}
			lines++
		}
	}
	if len(data) == 0 || data[0] != '{' || !ValidJSON(data) {
		return nil, nil
	}
	root := gjson.Parse(bytesView(data))
	w := walker{fn: fn}
	w.frame(f, string(event), root)
	if w.err != nil {
		return nil, w.err
	}
	if len(w.edits) == 0 {
		return nil, nil
	}
	nd := ApplyEdits(data, w.edits)
	b := make([]byte, 0, len(nd)+len(event)+16)
	if len(event) > 0 {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, nd...) // applyEdits output is compact where it edited: no raw newlines added
	return append(b, "\n\n"...), nil
}

// walker collects the edits fn asks for on one JSON document.
type walker struct {
	fn    TextFunc
	edits []Edit
	err   error
}

// visit hands one string value to fn and records its replacement.
func (w *walker) visit(v gjson.Result, t Text) {
	if w.err != nil || v.Type != gjson.String || v.Str == "" {
		return
	}
	t.Value = v.Str
	out, err := w.fn(t)
	if err != nil {
		w.err = err
		return
	}
	if out != v.Str {
		w.edits = append(w.edits, Edit{Start: v.Index, End: v.Index + len(v.Raw), Text: out})
	}
}

// text visits a complete plain text.
func (w *walker) text(v gjson.Result, answer bool) { w.visit(v, Text{Answer: answer}) }

// chatMessage walks one Chat Completions message (a request's or an answer's choice): its
// content (answer: the reply text proper), refusal, tool call and function call arguments.
func (w *walker) chatMessage(m gjson.Result, answer bool) {
	w.content(m.Get("content"), answer)
	w.text(m.Get("refusal"), false)
	m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		w.args(tc.Get("function.arguments"))
		return w.err == nil
	})
	w.args(m.Get("function_call.arguments"))
}

// delta visits a piece of streamed text on channel ch.
func (w *walker) delta(v gjson.Result, ch string, json, answer bool) {
	w.visit(v, Text{Delta: true, Channel: ch, JSON: json, Answer: answer})
}

// content visits a string, or the texts of a parts/blocks array (chat parts, responses parts,
// Anthropic blocks, tool_result content).
func (w *walker) content(c gjson.Result, answer bool) {
	if c.Type == gjson.String {
		w.text(c, answer)
		return
	}
	if !c.IsArray() {
		return
	}
	c.ForEach(func(_, p gjson.Result) bool {
		w.part(p, answer)
		return w.err == nil
	})
}

// part visits one content part or block.
func (w *walker) part(p gjson.Result, answer bool) {
	switch p.Get("type").Str {
	case "text", "input_text", "output_text":
		w.text(p.Get("text"), answer)
	case "refusal":
		w.text(p.Get("refusal"), false)
	case "tool_use", "server_tool_use":
		w.jsonValue(p.Get("input"))
	case "tool_result":
		w.content(p.Get("content"), false)
	}
}

// args visits tool-call arguments: JSON text in a JSON string.
func (w *walker) args(v gjson.Result) {
	if w.err != nil || v.Type != gjson.String || v.Str == "" {
		return
	}
	inner := []byte(v.Str)
	if jsonscan.CheckNesting(inner) != nil { // depth bounds jsonValue's recursion
		w.text(v, false)
		return
	}
	sub := walker{fn: w.fn}
	sub.jsonValue(gjson.Parse(v.Str))
	if sub.err != nil {
		w.err = sub.err
		return
	}
	if len(sub.edits) > 0 {
		w.edits = append(w.edits, Edit{Start: v.Index, End: v.Index + len(v.Raw), Text: string(ApplyEdits(inner, sub.edits))})
	}
}

// jsonValue visits every string of a JSON value: object keys and string values, at any depth.
func (w *walker) jsonValue(v gjson.Result) {
	switch {
	case w.err != nil:
	case v.Type == gjson.String:
		w.text(v, false)
	case v.IsObject():
		v.ForEach(func(k, e gjson.Result) bool {
			w.text(k, false)
			w.jsonValue(e)
			return w.err == nil
		})
	case v.IsArray():
		v.ForEach(func(_, e gjson.Result) bool {
			w.jsonValue(e)
			return w.err == nil
		})
	}
}

// responsesItem visits one Responses API input or output item.
func (w *walker) responsesItem(it gjson.Result, answer bool) {
	switch it.Get("type").Str {
	case "function_call":
		w.args(it.Get("arguments"))
	case "function_call_output", "custom_tool_call_output":
		w.content(it.Get("output"), false)
	case "custom_tool_call":
		w.text(it.Get("input"), false)
	case "message", "":
		w.content(it.Get("content"), answer)
	}
}

// response visits a complete answer of format f.
func (w *walker) response(f Format, root gjson.Result) {
	switch f {
	case FormatChat:
		root.Get("choices").ForEach(func(i, ch gjson.Result) bool {
			w.chatMessage(ch.Get("message"), i.Int() == 0)
			return w.err == nil
		})
	case FormatMessages:
		w.content(root.Get("content"), true)
	case FormatResponses:
		root.Get("output").ForEach(func(_, it gjson.Result) bool {
			w.responsesItem(it, true)
			return w.err == nil
		})
	case FormatCompletions:
		root.Get("choices").ForEach(func(i, ch gjson.Result) bool {
			w.text(ch.Get("text"), i.Int() == 0)
			return w.err == nil
		})
	case FormatTranscriptions:
		w.text(root.Get("text"), true)
		root.Get("segments").ForEach(func(_, seg gjson.Result) bool {
			w.text(seg.Get("text"), false)
			return w.err == nil
		})
		root.Get("words").ForEach(func(_, wd gjson.Result) bool {
			w.text(wd.Get("word"), false)
			return w.err == nil
		})
	case FormatImages:
		root.Get("data").ForEach(func(_, d gjson.Result) bool {
			w.text(d.Get("revised_prompt"), false)
			return w.err == nil
		})
	}
}

// frame visits the texts of one decoded SSE frame of format f (event name ev, JSON root).
func (w *walker) frame(f Format, ev string, root gjson.Result) {
	typ := root.Get("type").Str
	if typ == "" {
		typ = ev
	}
	switch f {
	case FormatCompletions:
		root.Get("choices").ForEach(func(_, ch gjson.Result) bool {
			idx := ch.Get("index").Int()
			w.delta(ch.Get("text"), "choice "+strconv.FormatInt(idx, 10), false, idx == 0)
			return w.err == nil
		})
	case FormatChat:
		root.Get("choices").ForEach(func(_, ch gjson.Result) bool {
			idx := ch.Get("index").Int()
			ci := "choice " + strconv.FormatInt(idx, 10)
			d := ch.Get("delta")
			w.delta(d.Get("content"), ci, false, idx == 0)
			w.delta(d.Get("refusal"), ci+" refusal", false, false)
			d.Get("tool_calls").ForEach(func(j, tc gjson.Result) bool {
				k := j.Int()
				if x := tc.Get("index"); x.Exists() {
					k = x.Int()
				}
				w.delta(tc.Get("function.arguments"), ci+" tool "+strconv.FormatInt(k, 10), true, false)
				return w.err == nil
			})
			w.delta(d.Get("function_call.arguments"), ci+" function_call", true, false)
			// Some servers repeat the whole message in the last chunk.
			m := ch.Get("message")
			w.content(m.Get("content"), false)
			m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
				w.args(tc.Get("function.arguments"))
				return w.err == nil
			})
			return w.err == nil
		})
	case FormatMessages:
		switch typ {
		case "message_start":
			w.content(root.Get("message.content"), false)
		case "content_block_start":
			cb := root.Get("content_block")
			switch cb.Get("type").Str {
			case "text":
				w.delta(cb.Get("text"), messagesTextChannel, false, true)
			default:
				w.part(cb, false)
			}
		case "content_block_delta":
			d := root.Get("delta")
			ch := "block " + strconv.FormatInt(root.Get("index").Int(), 10)
			switch d.Get("type").Str {
			case "text_delta":
				w.delta(d.Get("text"), messagesTextChannel, false, true)
			case "input_json_delta":
				w.delta(d.Get("partial_json"), ch, true, false)
			}
		}
	case FormatResponses:
		item := "item " + strconv.FormatInt(root.Get("output_index").Int(), 10)
		switch typ {
		case "response.output_text.delta":
			w.delta(root.Get("delta"), item+" part "+strconv.FormatInt(root.Get("content_index").Int(), 10), false, true)
		case "response.output_text.done":
			w.text(root.Get("text"), false)
		case "response.refusal.delta":
			w.delta(root.Get("delta"), item+" refusal "+strconv.FormatInt(root.Get("content_index").Int(), 10), false, false)
		case "response.refusal.done":
			w.text(root.Get("refusal"), false)
		case "response.content_part.added", "response.content_part.done":
			w.part(root.Get("part"), false)
		case "response.output_item.added", "response.output_item.done":
			w.responsesItem(root.Get("item"), false)
		case "response.function_call_arguments.delta":
			w.delta(root.Get("delta"), item+" arguments", true, false)
		case "response.function_call_arguments.done":
			w.args(root.Get("arguments"))
		case "response.custom_tool_call_input.delta":
			w.delta(root.Get("delta"), item+" input", false, false)
		case "response.custom_tool_call_input.done":
			w.text(root.Get("input"), false)
		case "response.created", "response.in_progress", "response.completed", "response.incomplete", "response.failed":
			root.Get("response.output").ForEach(func(_, it gjson.Result) bool {
				w.responsesItem(it, false)
				return w.err == nil
			})
		}
	}
}
