package a2a

import (
	"net/http"
	"strconv"
	"strings"
)

// Protocol versions served on the same route (API.md "Agents and A2A"): A2A 0.3 (the
// default) and A2A 1.0, chosen per request by the A2A-Version header (A2A 1.0 spec §3.2.6
// "Service Parameters": the A2A-Version parameter is the version the client uses, e.g. "0.3";
// this gateway serves a request without it in 0.3, API.md "Agents and A2A").
const (
	// VersionHeader is the A2A 1.0 service parameter naming the protocol version of a request.
	VersionHeader = "A2A-Version"
	// Version03 and Version10 are the versions served, as the card's supportedInterfaces name
	// them (protocolVersion).
	Version03 = "0.3"
	Version10 = "1.0"
)

// JSON-RPC method names of the A2A 1.0 JSON-RPC binding (A2A 1.0 spec §9: PascalCase names
// matching the gRPC service).
const (
	MethodSendMessage          = "SendMessage"
	MethodSendStreamingMessage = "SendStreamingMessage"
	MethodGetTask              = "GetTask"
	MethodCancelTask           = "CancelTask"
	MethodListTasks            = "ListTasks"
	MethodSubscribeToTask      = "SubscribeToTask"
	MethodCreatePushConfig     = "CreateTaskPushNotificationConfig"
	MethodGetPushConfig        = "GetTaskPushNotificationConfig"
	MethodListPushConfigs      = "ListTaskPushNotificationConfigs"
	MethodDeletePushConfig     = "DeleteTaskPushNotificationConfig"
	MethodGetExtendedCard10    = "GetExtendedAgentCard"
)

// CodeVersionNotSupported is the JSON-RPC code of A2A 1.0's VersionNotSupportedError (A2A 1.0
// spec §3.2.6: "If the version is not supported, the agent returns VersionNotSupportedError";
// -32009 as the A2A SDKs map it, e.g. @a2a-js/sdk 1.x A2A_ERROR_CODE.VERSION_NOT_SUPPORTED),
// answered to a request whose A2A-Version this gateway does not serve.
const CodeVersionNotSupported = -32009

// wire is the protocol version one request is served in.
type wire int

const (
	wire03 wire = iota
	wire10
)

// negotiate reads the A2A-Version header of r: absent or empty → 0.3; "0.3" or "1.0" (a patch
// component, e.g. "1.0.0", is accepted and ignored, since versions are compared by
// Major.Minor) → that version; anything else → -32009 "Version not supported" with data
// {"version": <header>, "supportedVersions": ["0.3", "1.0"]}.
func negotiate(r *http.Request) (wire, *Error) {
	v := strings.TrimSpace(r.Header.Get(VersionHeader))
	if v == "" {
		return wire03, nil
	}
	switch majorMinor(v) {
	case Version03:
		return wire03, nil
	case Version10:
		return wire10, nil
	}
	return wire03, &Error{
		Code:    CodeVersionNotSupported,
		Message: "Version not supported",
		Data:    map[string]any{"version": v, "supportedVersions": []string{Version03, Version10}},
	}
}

// majorMinor normalizes "M.m" or "M.m.p" (decimal components) to "M.m"; "" when v is not such
// a version.
func majorMinor(v string) string {
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return ""
	}
	nums := make([]string, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return ""
		}
		nums[i] = strconv.FormatUint(n, 10)
	}
	return nums[0] + "." + nums[1]
}
