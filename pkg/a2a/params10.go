package a2a

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
)

// parseSendParams validates the params of a send method in w's shapes.
func (w wire) parseSendParams(raw json.RawMessage) (*sendParams, *Error) {
	if w == wire10 {
		return parseSendParams10(raw)
	}
	return parseSendParams(raw)
}

// parseSendParams10 validates an A2A 1.0 SendMessageRequest (SendMessage,
// SendStreamingMessage) and converts its message to the 0.3 model the tasks are kept in.
// Every problem is -32602 naming the field, as for 0.3.
//
// Message: role "ROLE_USER" or "ROLE_AGENT" (absent: ROLE_USER); messageId generated when
// absent; contextId, taskId, metadata, extensions and referenceTaskIds as in 0.3. Parts are the
// 1.0 unified Part: exactly one of text (a string), raw (base64 bytes), url (a string) or data
// (any JSON value), with optional metadata, filename and mediaType. raw and url become 0.3 file
// parts (filename → name, mediaType → mimeType); data becomes a data part (a non-object value
// is kept as {"value": v}, since a 0.3 data part holds an object). As in 0.3 only text parts
// reach the model and at least one is required. tenant, configuration and request metadata
// are accepted and ignored (replies are text, SendMessage always blocks, no push
// notifications).
func parseSendParams10(raw json.RawMessage) (*sendParams, *Error) {
	params, perr := paramsObject(raw)
	if perr != nil {
		return nil, perr
	}
	rawMsg, ok := params["message"]
	if !ok || jsonKind(rawMsg) == kindNull {
		return nil, invalidParams("params.message is required")
	}
	var fields map[string]json.RawMessage
	if jsonKind(rawMsg) != kindObject || json.Unmarshal(rawMsg, &fields) != nil {
		return nil, invalidParams("params.message must be an object")
	}
	c := checker{fields: fields, prefix: "params.message."}
	msg := &a2atypes.Message{Role: a2atypes.MessageRoleUser}
	role, _ := c.optionalString("role")
	switch role {
	case "", "ROLE_USER":
	case "ROLE_AGENT":
		msg.Role = a2atypes.MessageRoleAgent
	default:
		if len(c.problems) == 0 {
			c.fail("role", `must be "ROLE_USER" or "ROLE_AGENT"`)
		}
	}
	msg.ID, _ = c.optionalString("messageId")
	if msg.ID == "" {
		msg.ID = uuid.NewString()
	}
	msg.ContextID, _ = c.optionalString("contextId")
	taskID, _ := c.optionalString("taskId")
	msg.TaskID = a2atypes.TaskID(taskID)
	if len(c.problems) > 0 {
		return nil, invalidParams("%s", c.problems[0])
	}
	return parseMessageBody(fields, msg, parsePart10)
}

// parsePart10 validates one A2A 1.0 Part and converts it to its 0.3 equivalent.
func parsePart10(i int, raw json.RawMessage) (a2atypes.Part, *Error) {
	path := fmt.Sprintf("params.message.parts[%d]", i)
	var fields map[string]json.RawMessage
	if jsonKind(raw) != kindObject || json.Unmarshal(raw, &fields) != nil {
		return nil, invalidParams("%s must be an object", path)
	}
	c := checker{fields: fields, prefix: path + "."}
	var content []string
	for _, k := range []string{"text", "raw", "url", "data"} {
		if _, ok := c.present(k); ok {
			content = append(content, k)
		}
	}
	switch len(content) {
	case 0:
		return nil, invalidParams("%s must have one of text, raw, url or data", path)
	case 1:
	default:
		return nil, invalidParams("%s must have only one of text, raw, url or data (has %s)", path, strings.Join(content, ", "))
	}
	var meta map[string]any
	if m, ok := c.present("metadata"); ok {
		if jsonKind(m) != kindObject || json.Unmarshal(m, &meta) != nil {
			return nil, invalidParams("%s.metadata must be an object", path)
		}
	}
	filename, _ := c.optionalString("filename")
	mediaType, _ := c.optionalString("mediaType")
	var value string
	if content[0] != "data" {
		value, _ = c.optionalString(content[0])
	}
	if len(c.problems) > 0 {
		return nil, invalidParams("%s", c.problems[0])
	}
	if content[0] == "raw" && !isBase64(value) {
		return nil, invalidParams("%s.raw must be base64", path)
	}
	fileMeta := a2atypes.FileMeta{MimeType: mediaType, Name: filename}
	switch content[0] {
	case "text":
		return a2atypes.TextPart{Text: value, Metadata: meta}, nil
	case "raw":
		return a2atypes.FilePart{File: a2atypes.FileBytes{FileMeta: fileMeta, Bytes: value}, Metadata: meta}, nil
	case "url":
		return a2atypes.FilePart{File: a2atypes.FileURI{FileMeta: fileMeta, URI: value}, Metadata: meta}, nil
	}
	var data any
	_ = json.Unmarshal(fields["data"], &data) // valid JSON: it came out of the request
	obj, ok := data.(map[string]any)
	if !ok {
		obj = map[string]any{"value": data}
	}
	return a2atypes.DataPart{Data: obj, Metadata: meta}, nil
}

// isBase64 accepts the base64 forms ProtoJSON accepts for bytes (RFC 4648 standard or URL-safe
// alphabet, padded or not).
func isBase64(s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if _, err := enc.DecodeString(s); err == nil {
			return true
		}
	}
	return false
}
