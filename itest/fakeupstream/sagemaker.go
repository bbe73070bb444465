package fakeupstream

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// StartSageMaker starts a fake SageMaker runtime serving a text-generation endpoint:
// POST /endpoints/{name}/invocations {"inputs", "parameters"} answered
// [{"generated_text": "sagemaker <name>: <inputs>"}], after verifying the SigV4 signature as
// StartBedrock does, for service "sagemaker" (b.Service is set to it).
func StartSageMaker(t testing.TB, b Bedrock, opts ...Option) *Server {
	s := Start(t, opts...)
	b.Service = "sagemaker"
	s.native = func(w http.ResponseWriter, r *http.Request, body []byte) {
		if code, typ, msg := b.verify(r, body); code != 0 {
			writeAWSError(w, code, typ, msg)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/endpoints/")
		name, ok2 := strings.CutSuffix(rest, "/invocations")
		if !ok || !ok2 || r.Method != http.MethodPost {
			writeAWSError(w, http.StatusNotFound, "UnknownOperationException", "Unknown operation")
			return
		}
		in := gjson.GetBytes(body, "inputs")
		if in.Type != gjson.String {
			writeAWSError(w, http.StatusBadRequest, "ValidationException", "inputs: a string is required")
			return
		}
		writeJSON(w, http.StatusOK, []any{map[string]any{"generated_text": "sagemaker " + name + ": " + in.Str}})
	}
	return s
}
