package a2a

import (
	"encoding/json"
	"fmt"
	"strings"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
)

// sendParams is a validated MessageSendParams (A2A spec §7.1.1) of message/send or
// message/stream.
type sendParams struct {
	// message is the incoming Message (A2A spec §6.4), normalized: role defaults to "user",
	// a missing messageId is generated, parts are typed.
	message *a2atypes.Message
	// text is the message's text parts joined with "\n": what the agent's model is asked.
	text string
}

// parseSendParams validates the params of message/send and message/stream. Every problem is
// -32602 naming the field, e.g. "Invalid params: params.message.parts must not be empty".
//
// Lenient where LiteLLM is: a part without "kind" but with a string "text" is a text part;
// role and messageId may be omitted. params.configuration (blocking, historyLength,
// acceptedOutputModes, pushNotificationConfig) is ignored: replies are always text, message/send
// always blocks, and push notifications are not supported. Non-text parts (file, data) are
// validated and kept in the task history but not sent to the model.
func parseSendParams(raw json.RawMessage) (*sendParams, *Error) {
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
	msg := &a2atypes.Message{Role: a2atypes.MessageRoleUser}
	strField := func(name string) (string, *Error) {
		v, ok := fields[name]
		if !ok || jsonKind(v) == kindNull {
			return "", nil
		}
		var s string
		if jsonKind(v) != kindString || json.Unmarshal(v, &s) != nil {
			return "", invalidParams("params.message.%s must be a string", name)
		}
		return s, nil
	}
	role, perr := strField("role")
	if perr != nil {
		return nil, perr
	}
	switch a2atypes.MessageRole(role) {
	case "":
	case a2atypes.MessageRoleUser, a2atypes.MessageRoleAgent:
		msg.Role = a2atypes.MessageRole(role)
	default:
		return nil, invalidParams(`params.message.role must be "user" or "agent"`)
	}
	if msg.ID, perr = strField("messageId"); perr != nil {
		return nil, perr
	}
	if msg.ID == "" {
		msg.ID = uuid.NewString()
	}
	if msg.ContextID, perr = strField("contextId"); perr != nil {
		return nil, perr
	}
	taskID, perr := strField("taskId")
	if perr != nil {
		return nil, perr
	}
	msg.TaskID = a2atypes.TaskID(taskID)
	return parseMessageBody(fields, msg, parsePart)
}

// parsePart validates one Part (A2A spec §6.5): a TextPart (§6.5.1), FilePart (§6.5.2) or
// DataPart (§6.5.3), discriminated by "kind".
func parsePart(i int, raw json.RawMessage) (a2atypes.Part, *Error) {
	path := fmt.Sprintf("params.message.parts[%d]", i)
	var fields map[string]json.RawMessage
	if jsonKind(raw) != kindObject || json.Unmarshal(raw, &fields) != nil {
		return nil, invalidParams("%s must be an object", path)
	}
	var partKind string
	if v, ok := fields["kind"]; ok && jsonKind(v) != kindNull {
		if jsonKind(v) != kindString || json.Unmarshal(v, &partKind) != nil {
			return nil, invalidParams("%s.kind must be a string", path)
		}
	}
	_, hasText := fields["text"]
	switch {
	case partKind == "text" || (partKind == "" && hasText):
		var p a2atypes.TextPart
		v, ok := fields["text"]
		if !ok || jsonKind(v) == kindNull {
			return nil, invalidParams("%s.text is required", path)
		}
		if jsonKind(v) != kindString || json.Unmarshal(v, &p.Text) != nil {
			return nil, invalidParams("%s.text must be a string", path)
		}
		if m, ok := fields["metadata"]; ok && jsonKind(m) != kindNull {
			if jsonKind(m) != kindObject || json.Unmarshal(m, &p.Metadata) != nil {
				return nil, invalidParams("%s.metadata must be an object", path)
			}
		}
		return p, nil
	case partKind == "file":
		var p a2atypes.FilePart
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, invalidParams("%s: %v", path, err)
		}
		return p, nil
	case partKind == "data":
		var p a2atypes.DataPart
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, invalidParams("%s: %v", path, err)
		}
		if p.Data == nil {
			return nil, invalidParams("%s.data must be an object", path)
		}
		return p, nil
	case partKind == "":
		return nil, invalidParams("%s.kind is required", path)
	default:
		return nil, invalidParams(`%s.kind must be "text", "file" or "data"`, path)
	}
}

// taskParams is a validated TaskQueryParams (A2A spec §7.3.1) or TaskIdParams (§7.4.1).
type taskParams struct {
	id string
	// historyLength is nil when absent; tasks/get returns at most that many recent messages.
	historyLength *int
}

func parseTaskParams(raw json.RawMessage) (*taskParams, *Error) {
	params, perr := paramsObject(raw)
	if perr != nil {
		return nil, perr
	}
	var out taskParams
	v, ok := params["id"]
	if !ok || jsonKind(v) == kindNull {
		return nil, invalidParams("params.id is required")
	}
	if jsonKind(v) != kindString || json.Unmarshal(v, &out.id) != nil {
		return nil, invalidParams("params.id must be a string")
	}
	if out.id == "" {
		return nil, invalidParams("params.id is required")
	}
	if v, ok := params["historyLength"]; ok && jsonKind(v) != kindNull {
		var n int
		if jsonKind(v) != kindNumber || json.Unmarshal(v, &n) != nil || n < 0 {
			return nil, invalidParams("params.historyLength must be a non-negative integer")
		}
		out.historyLength = &n
	}
	return &out, nil
}

// paramsObject decodes the params member, which every A2A method requires to be an object.
func paramsObject(raw json.RawMessage) (map[string]json.RawMessage, *Error) {
	if raw == nil || jsonKind(raw) == kindNull {
		return nil, invalidParams("params is required")
	}
	var params map[string]json.RawMessage
	if jsonKind(raw) != kindObject || json.Unmarshal(raw, &params) != nil {
		return nil, invalidParams("params must be an object")
	}
	return params, nil
}

// parseMessageBody reads what both protocol versions' Message share, after the version's own
// fields (role, ids) are set on msg: metadata, extensions, referenceTaskIds and the parts
// (each read by parsePart, the version's Part parser). At least one part must be text: the
// texts, joined by newlines, are what the agent's model is asked. Errors: -32602 naming the
// member.
func parseMessageBody(fields map[string]json.RawMessage, msg *a2atypes.Message, parsePart func(int, json.RawMessage) (a2atypes.Part, *Error)) (*sendParams, *Error) {
	if v, ok := fields["metadata"]; ok && jsonKind(v) != kindNull {
		if jsonKind(v) != kindObject || json.Unmarshal(v, &msg.Metadata) != nil {
			return nil, invalidParams("params.message.metadata must be an object")
		}
	}
	if v, ok := fields["extensions"]; ok && jsonKind(v) != kindNull {
		if jsonKind(v) != kindArray || json.Unmarshal(v, &msg.Extensions) != nil {
			return nil, invalidParams("params.message.extensions must be an array of strings")
		}
	}
	if v, ok := fields["referenceTaskIds"]; ok && jsonKind(v) != kindNull {
		if jsonKind(v) != kindArray || json.Unmarshal(v, &msg.ReferenceTasks) != nil {
			return nil, invalidParams("params.message.referenceTaskIds must be an array of strings")
		}
	}
	rawParts, ok := fields["parts"]
	if !ok || jsonKind(rawParts) == kindNull {
		return nil, invalidParams("params.message.parts is required")
	}
	var parts []json.RawMessage
	if jsonKind(rawParts) != kindArray || json.Unmarshal(rawParts, &parts) != nil {
		return nil, invalidParams("params.message.parts must be an array")
	}
	if len(parts) == 0 {
		return nil, invalidParams("params.message.parts must not be empty")
	}
	var texts []string
	for i, rawPart := range parts {
		part, perr := parsePart(i, rawPart)
		if perr != nil {
			return nil, perr
		}
		msg.Parts = append(msg.Parts, part)
		if tp, ok := part.(a2atypes.TextPart); ok {
			texts = append(texts, tp.Text)
		}
	}
	if len(texts) == 0 {
		return nil, invalidParams("params.message.parts has no text part")
	}
	return &sendParams{message: msg, text: strings.Join(texts, "\n")}, nil
}
