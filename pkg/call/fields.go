package call

import (
	"unsafe"

	"github.com/tidwall/gjson"

	"lockstep/pkg/jsonscan"
)

// Fields are the members of a JSON request body the pipeline reads, taken in the one pass
// that checks the body (jsonscan.Scan: valid JSON, depth, no duplicate member anywhere,
// UTF-8), so each is the body's only member of its name: what the upstream reads too. The
// results alias the body (copy what outlives it). A route keeps its Fields on its own stack
// and hands Serve a pointer (no allocation per call).
type Fields struct {
	// Model and Stream are the body's "model" and "stream" (absent: gjson's zero Result).
	Model, Stream  gjson.Result
	guardrails     gjson.Result // "guardrails"
	metaGuardrails gjson.Result // "metadata.guardrails"
	// endUser are the endUserFields: user, litellm_metadata.user, metadata.user_id,
	// safety_identifier
	endUser [len(endUserFields)]gjson.Result
	// hooks are the members read by hooks.go (fallbacks, mock_testing_fallbacks,
	// mock_testing_rate_limit_error, mock_timeout, timeout); anyHook is true when one is there
	hooks   [len(hookFields)]gjson.Result
	anyHook bool
}

// Scan reads body's Fields; none when body is not a valid JSON object (for bodies the gateway
// built itself; a client's goes through ScanChecked).
func Scan(body []byte) Fields {
	rf, _ := ScanChecked(body)
	return rf
}

// ScanChecked checks body (API.md "Request bodies", jsonscan) and reads its Fields in the
// same pass: a *jsonscan.Error when body is not valid; no fields when it is valid but not an
// object.
func ScanChecked(body []byte) (Fields, error) {
	var rf Fields
	var meta, litellmMeta gjson.Result
	err := jsonscan.Scan(body, func(name, value []byte) {
		var dst *gjson.Result
		switch string(name) {
		case "model":
			dst = &rf.Model
		case "stream":
			dst = &rf.Stream
		case "user":
			dst = &rf.endUser[0]
		case "litellm_metadata":
			dst = &litellmMeta
		case "metadata":
			dst = &meta
		case "safety_identifier":
			dst = &rf.endUser[3]
		case "guardrails":
			dst = &rf.guardrails
		case hookFields[0], hookFields[1], hookFields[2], hookFields[3], hookFields[4]:
			for i, h := range hookFields {
				if h == string(name) {
					dst = &rf.hooks[i]
				}
			}
			rf.anyHook = true
		default:
			return
		}
		*dst = gjson.Parse(unsafe.String(unsafe.SliceData(value), len(value)))
	})
	if err != nil {
		return Fields{}, err
	}
	if litellmMeta.Exists() {
		rf.endUser[1] = litellmMeta.Get("user")
	}
	if meta.Exists() {
		rf.metaGuardrails = meta.Get("guardrails")
		rf.endUser[2] = meta.Get("user_id")
	}
	return rf, nil
}
