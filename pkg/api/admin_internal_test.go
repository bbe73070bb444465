package api

import (
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	mgmt "lockstep/pkg/admin"
)

// The use-cases' typed errors are answered with their status and the use-case's text, in the
// route's envelope: OpenAI's on /model/*, LiteLLM's {"detail": {"error"}} on a detail route.
func TestAdminErrorsMapToStatusAndEnvelope(t *testing.T) {
	t.Parallel()
	s := New(Deps{Log: zerolog.Nop()})
	s.detail["/guardrails/:id"] = "guardrails"
	for _, tc := range []struct {
		err    error
		status int
		typ    string
	}{
		{&mgmt.NotFound{Msg: "Model with id=m not found"}, 404, "not_found_error"},
		{&mgmt.Conflict{Msg: "model with id=m already exists"}, 409, "conflict_error"},
		{&mgmt.Invalid{Field: "model_name", Msg: "model_name is required"}, 400, "invalid_request_error"},
		{&mgmt.Forbidden{Msg: "no"}, 403, "permission_error"},
		{&mgmt.Unavailable{Msg: "no database configured: models are stored in Postgres; set --database-url or general_settings.database_url"}, 503, "service_unavailable"},
	} {
		msg := tc.err.Error()
		code, body := render(t, s, "/model/new", fmt.Errorf("wrapped: %w", tc.err))
		require.Equal(t, tc.status, code)
		require.JSONEq(t, fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":"%d"}}`, msg, tc.typ, tc.status), body)
		code, body = render(t, s, "/guardrails/:id", tc.err)
		require.Equal(t, tc.status, code)
		require.JSONEq(t, fmt.Sprintf(`{"detail":{"error":%q}}`, msg), body)
	}
	require.Nil(t, adminError(fmt.Errorf("other")))
}
