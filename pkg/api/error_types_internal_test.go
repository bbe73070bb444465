package api

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	mgmt "lockstep/pkg/admin"
	pipeline "lockstep/pkg/call"
	"lockstep/pkg/format"
	"lockstep/pkg/guardrail"
)

// render runs the error handler for err on a request matched to route pattern path.
func render(t *testing.T, s *Server, path string, err error) (int, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/x", nil)
	w := httptest.NewRecorder()
	c := s.e.NewContext(req, w)
	c.SetPath(path)
	s.errorHandler(err, c)
	return w.Code, w.Body.String()
}

// The Anthropic envelope's type is Anthropic's documented one for the status, unless the
// error already carries one of Anthropic's types (an Anthropic upstream's, passed through);
// the OpenAI envelope keeps its own types.
func TestAnthropicErrorTypeByStatus(t *testing.T) {
	t.Parallel()
	s := New(Deps{Log: zerolog.Nop()})
	for _, tc := range []struct {
		err       error
		anthropic string
		openai    string
	}{
		{&Error{Status: 400}, "invalid_request_error", "invalid_request_error"},
		{&Error{Status: 401}, "authentication_error", "authentication_error"},
		{&Error{Status: 401, Type: "key_model_access_denied"}, "authentication_error", "key_model_access_denied"},
		{&Error{Status: 403}, "permission_error", "permission_error"},
		{&Error{Status: 404}, "not_found_error", "not_found_error"},
		{&Error{Status: 409, Type: "conflict_error"}, "api_error", "conflict_error"},
		{&Error{Status: 413}, "request_too_large", "request_too_large"},
		{&Error{Status: 422}, "invalid_request_error", "invalid_request_error"},
		{&Error{Status: 429}, "rate_limit_error", "rate_limit_error"},
		{&Error{Status: 500, Type: "internal_server_error"}, "api_error", "internal_server_error"},
		{&Error{Status: 502}, "api_error", "internal_server_error"},
		{&Error{Status: 503, Type: "service_unavailable"}, "api_error", "service_unavailable"},
		{&Error{Status: 529}, "overloaded_error", "internal_server_error"},
		{&format.UpstreamError{Status: 429, Type: "rate_limit_exceeded"}, "rate_limit_error", "rate_limit_exceeded"},
		{&format.UpstreamError{Status: 500, Type: "server_error"}, "api_error", "server_error"},
		{&format.UpstreamError{Status: 504}, "timeout_error", "timeout_error"},
		// Anthropic type names are kept as sent
		{&format.UpstreamError{Status: 529, Type: "overloaded_error"}, "overloaded_error", "overloaded_error"},
		{&format.UpstreamError{Status: 503, Type: "overloaded_error"}, "overloaded_error", "overloaded_error"},
		{&format.UpstreamError{Status: 504, Type: "timeout_error"}, "timeout_error", "timeout_error"},
		{&format.UpstreamError{Status: 402, Type: "billing_error"}, "billing_error", "billing_error"},
		{&format.UpstreamError{Status: 401, Type: "authentication_error"}, "authentication_error", "authentication_error"},
		{fmt.Errorf("wrapped: %w", mgmt.ErrUnavailable), "api_error", "service_unavailable"},
	} {
		for _, p := range []string{"/v1/messages", "/messages"} {
			_, body := render(t, s, p, tc.err)
			require.Equal(t, "error", gjson.Get(body, "type").String(), body)
			require.Equal(t, tc.anthropic, gjson.Get(body, "error.type").String(), "%s %v: %s", p, tc.err, body)
		}
		_, body := render(t, s, "/v1/chat/completions", tc.err)
		require.Equal(t, tc.openai, gjson.Get(body, "error.type").String(), "%v: %s", tc.err, body)
	}
}

// A database outage on a guardrail or access-group route is a detail-envelope 503 saying
// nothing was changed; elsewhere the OpenAI envelope's generic text.
func TestDetailRouteOutageMessage(t *testing.T) {
	t.Parallel()
	s := New(Deps{Log: zerolog.Nop()})
	err := fmt.Errorf("insert: %w", mgmt.ErrUnavailable)
	for path, what := range map[string]string{"/guardrails/:id": "guardrails", "/access_group/new": "access groups"} {
		st, body := render(t, s, path, err)
		require.Equal(t, 503, st)
		require.Equal(t, "database unavailable: "+what+" are stored in Postgres and nothing was changed; retry when the database is back",
			gjson.Get(body, "detail.error").String(), body)
	}
	st, body := render(t, s, "/model/new", err)
	require.Equal(t, 503, st)
	require.Equal(t, "database unavailable: the change was not saved; retry when the database is back", gjson.Get(body, "error.message").String(), body)
}

// One table of error types: a failure reported after a stream started (an error event) has
// the type the same failure gets in a plain error answer, in every route's format.
func TestStreamErrorTypesMatchPlainErrors(t *testing.T) {
	t.Parallel()
	s := New(Deps{Log: zerolog.Nop()})
	for _, err := range []error{
		authErr(401, "Authentication Error, No api key passed in."),
		&Error{Status: 401, Type: "key_model_access_denied", Message: "no"},
		&format.UpstreamError{Status: 401, Message: "bad key"},
		&format.UpstreamError{Status: 429, Type: "rate_limit_exceeded", Message: "slow"},
		&format.UpstreamError{Status: 500, Message: "boom"},
		&format.UpstreamError{Status: 503, Message: "down"},
		&format.UpstreamError{Status: 504, Message: "slow"},
		&format.UpstreamError{Status: 529, Type: "overloaded_error", Message: "busy"},
		&pipeline.Blocked{BlockedError: &guardrail.BlockedError{Message: "Content blocked: keyword 'x' detected"}},
	} {
		for path, f := range map[string]format.Format{"/v1/chat/completions": format.FormatChat, "/v1/messages": format.FormatMessages} {
			status, plain := render(t, s, path, err)
			req := httptest.NewRequest("POST", path, nil)
			c := s.e.NewContext(req, httptest.NewRecorder())
			c.SetPath(path)
			ae := s.errorInfo(c, err)
			require.Equal(t, status, ae.Status)
			ev := string(format.ErrorEventOf(f, ae.Status, ae.Type, ae.Message))
			_, data, _ := strings.Cut(ev, "data: ")
			require.Equal(t, gjson.Get(plain, "error.type").String(), gjson.Get(data, "error.type").String(), "%s %v: plain %s, stream %s", path, err, plain, data)
			require.Equal(t, gjson.Get(plain, "error.message").String(), gjson.Get(data, "error.message").String())
		}
	}
	require.Equal(t, "authentication_error", statusType(401))
}
