package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// JSON-RPC method names of the A2A v0.3 JSON-RPC binding (A2A spec §7).
const (
	MethodMessageSend          = "message/send"
	MethodMessageStream        = "message/stream"
	MethodTasksGet             = "tasks/get"
	MethodTasksCancel          = "tasks/cancel"
	MethodTasksResubscribe     = "tasks/resubscribe"
	MethodPushConfigSet        = "tasks/pushNotificationConfig/set"
	MethodPushConfigGet        = "tasks/pushNotificationConfig/get"
	MethodPushConfigList       = "tasks/pushNotificationConfig/list"
	MethodPushConfigDelete     = "tasks/pushNotificationConfig/delete"
	MethodGetExtendedAgentCard = "agent/getAuthenticatedExtendedCard"
)

// JSON-RPC error codes: the standard ones (JSON-RPC 2.0 §5.1, A2A spec §8.1) and the
// A2A-specific ones (A2A spec §8.2) this package answers with.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeAgentNotFound is the gateway's (and LiteLLM's) code for an unknown agent, from the
	// implementation-defined server-error range.
	CodeAgentNotFound                          = -32000
	CodeTaskNotFound                           = -32001
	CodeTaskNotCancelable                      = -32002
	CodePushNotificationNotSupported           = -32003
	CodeUnsupportedOperation                   = -32004
	CodeAuthenticatedExtendedCardNotConfigured = -32007
	// CodeUnauthenticated and CodeUnauthorized are a2a-go's codes for a2a.ErrUnauthenticated
	// and a2a.ErrUnauthorized ("permission denied"; internal/jsonrpc codeToError), outside the
	// reserved range. The gateway answers CodeUnauthorized when the caller's key may not use
	// the agent's model, CodeUnauthenticated when the key became unusable during the call.
	CodeUnauthenticated = -31401
	CodeUnauthorized    = -31403
)

// Error is a JSON-RPC 2.0 error object (JSON-RPC 2.0 §5.1, A2A spec §6.12). A [Completer] may
// return one (or an error wrapping one) to choose what the caller sees, e.g. CodeInvalidParams
// for input a guardrail rejected; any other Completer error becomes CodeInternalError.
//
// Data, when set, must be a JSON object: a2a-go's client decodes it into a map.
type Error struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

func newError(code int, prefix, format string, args ...any) *Error {
	return &Error{Code: code, Message: prefix + ": " + fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) *Error {
	return newError(CodeInvalidRequest, "Invalid Request", format, args...)
}

func invalidParams(format string, args ...any) *Error {
	return newError(CodeInvalidParams, "Invalid params", format, args...)
}

// internalError wraps a Completer (or other internal) failure: an *Error in the chain is
// passed through, anything else becomes -32603 with the cause in the message.
func internalError(err error) *Error {
	var rpcErr *Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	return &Error{Code: CodeInternalError, Message: "Internal error: " + err.Error()}
}

// request is a validated JSON-RPC 2.0 request object (JSON-RPC 2.0 §4).
type request struct {
	// id is the raw request id (a string or a number), echoed verbatim; nil when absent or null.
	id json.RawMessage
	// notification: the request has no "id" member (JSON-RPC 2.0 §4.1); it gets no response.
	// An explicit "id": null is a request (answered with id null), not a notification.
	notification bool
	method       string
	// params is the raw params member; nil when absent.
	params json.RawMessage
}

// response is a JSON-RPC 2.0 response object (JSON-RPC 2.0 §5). A nil ID encodes as null.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// parseRequest decodes body as one JSON-RPC 2.0 request. Not JSON → -32700 (id null); JSON
// but not a request object (a batch, a bad id, "jsonrpc" not "2.0", no method) → -32600, with
// the id when it could be read. A valid request without an "id" member is a notification
// (request.notification); an invalid one is answered with id null, as JSON-RPC 2.0 §5 requires
// when the id cannot be determined.
func parseRequest(body []byte) (request, *Error) {
	var req request
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			return req, newError(CodeParseError, "Parse error", "invalid JSON: %v", err)
		}
		if jsonKind(body) == kindArray {
			return req, invalidRequest("batch requests are not supported")
		}
		return req, invalidRequest("the request must be a JSON object")
	}
	if fields == nil { // the literal null
		return req, invalidRequest("the request must be a JSON object")
	}
	raw, hasID := fields["id"]
	if hasID {
		switch jsonKind(raw) {
		case kindNull:
		case kindString, kindNumber:
			req.id = raw
		default:
			return req, invalidRequest("id must be a string, a number or null")
		}
	}
	var version string
	if raw, ok := fields["jsonrpc"]; !ok || jsonKind(raw) != kindString || json.Unmarshal(raw, &version) != nil || version != "2.0" {
		return req, invalidRequest(`jsonrpc must be "2.0"`)
	}
	raw, ok := fields["method"]
	if !ok || jsonKind(raw) == kindNull {
		return req, invalidRequest("method is required")
	}
	if jsonKind(raw) != kindString || json.Unmarshal(raw, &req.method) != nil {
		return req, invalidRequest("method must be a string")
	}
	if req.method == "" {
		return req, invalidRequest("method is required")
	}
	req.params = fields["params"]
	req.notification = !hasID
	return req, nil
}

// writeJSON writes v as an application/json body with the given HTTP status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client is gone when this fails
}

func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	writeJSON(w, http.StatusOK, response{JSONRPC: "2.0", ID: id, Result: result})
}

func writeError(w http.ResponseWriter, status int, id json.RawMessage, e *Error) {
	writeJSON(w, status, response{JSONRPC: "2.0", ID: id, Error: e})
}
