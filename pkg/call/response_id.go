package call

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
)

// responseID is the "id" of an answer the client sees, as LiteLLM logs it as the spend log's
// request_id: the top-level "id" of a chat completion (chatcmpl-…), a response (resp_…) or a
// message (msg_…); in a stream event, that of the event's object ("response.id" of
// response.created, "message.id" of message_start). "" when the body has none (embeddings,
// an error). One gjson scan of the top level, no allocation but the id itself.
func responseID(body []byte) string {
	// fast path: "id" first, as OpenAI-compatible upstreams and lockstep's own renderers write it
	if rest, ok := bytes.CutPrefix(bytes.TrimLeft(body, " \t\r\n"), idFirst); ok {
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i])
		}
	}
	r := gjson.GetBytes(body, "id")
	if r.Type == gjson.String {
		return r.Str
	}
	for _, p := range [...]string{"response.id", "message.id"} {
		if r := gjson.GetBytes(body, p); r.Type == gjson.String {
			return r.Str
		}
	}
	return ""
}

var (
	dataPrefix = []byte("data:")
	idFirst    = []byte(`{"id":"`)
)

// streamResponseID is responseID of the first SSE "data:" payload in frames that has an id
// (a stream's first event names the answer's id in every format lockstep streams).
func streamResponseID(frames []byte) string {
	for len(frames) > 0 {
		line := frames
		if i := bytes.IndexByte(frames, '\n'); i >= 0 {
			line, frames = frames[:i], frames[i+1:]
		} else {
			frames = nil
		}
		if !bytes.HasPrefix(line, dataPrefix) {
			continue
		}
		payload := bytes.TrimSpace(line[len(dataPrefix):])
		if len(payload) == 0 || payload[0] != '{' {
			continue
		}
		if id := responseID(payload); id != "" {
			return id
		}
	}
	return ""
}

// requestTags are a request's metadata.tags (LiteLLM's request_tags of its spend log): the
// strings of the array, copied (tags aliases the request body); nil without any.
func requestTags(tags gjson.Result) []string {
	if !tags.IsArray() {
		return nil
	}
	var out []string
	tags.ForEach(func(_, v gjson.Result) bool {
		if v.Type == gjson.String {
			out = append(out, strings.Clone(v.Str))
		}
		return true
	})
	return out
}

// imageCount is the number of images an OpenAI Images answer carries ("data" entries), which
// LiteLLM prices at output_cost_per_image each.
func imageCount(body []byte) int {
	return int(gjson.GetBytes(body, "data.#").Int())
}
