package api

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/a2a"
	pipeline "lockstep/pkg/call"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/limits"
	"lockstep/pkg/spend"
)

// The pipeline's typed errors (pkg/call) are answered by the one error table: status, type,
// param and text as before they were typed (API.md "LLM routes", "Keys (admin) and their
// limits").
func TestCallErrorTable(t *testing.T) {
	s := New(Deps{Log: zerolog.Nop()})
	reset := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		err             error
		status          int
		typ, param, msg string
	}{
		{&pipeline.AccessDenied{Scope: "key", Allowed: []string{"a"}, Model: "m"}, 401, "key_model_access_denied", "model",
			"key not allowed to access model. This key can only access models=['a']. Tried to access m"},
		{&pipeline.AccessDenied{Scope: "team", Model: "m"}, 401, "team_model_access_denied", "model",
			"team not allowed to access model. This team can only access models=[]. Tried to access m"},
		{&pipeline.UnknownModel{Route: "chat_completion", Model: "nope"}, 400, "invalid_request_error", "model",
			"chat_completion: Invalid model name passed in model=nope. Call /v1/models to view available models for your key."},
		{&pipeline.UnknownModel{Route: "anthropic_messages"}, 400, "invalid_request_error", "model",
			"anthropic_messages: Invalid model name passed in model=None. Call /v1/models to view available models for your key."},
		{&pipeline.RateLimited{Subject: "api_key", ID: "tok", Kind: limits.KindRequests, Limit: 3, ResetAt: reset}, 429, "rate_limit_error", "",
			"Rate limit exceeded for api_key: tok. Limit type: requests. Current limit: 3, Remaining: 0. Limit resets at: 2026-01-02 03:04:05 UTC"},
		{&pipeline.BudgetExceeded{Spend: 2, Max: 1}, 400, "budget_exceeded", "", "Budget has been exceeded! Current cost: 2.0, Max budget: 1.0"},
		{&pipeline.Invalid{Field: "fallbacks", Msg: "fallbacks[0]: the model name is empty"}, 400, "invalid_request_error", "",
			"fallbacks[0]: the model name is empty"},
		{&pipeline.UnknownGuardrail{Name: "g9"}, 404, "not_found_error", "",
			"Guardrail 'g9' not found. Please ensure the guardrail is configured in your LiteLLM proxy."},
		{&pipeline.KeyUnusable{Why: "key blocked"}, 401, "authentication_error", "", "Authentication Error, key blocked."},
		{&pipeline.MissingParam{Name: "[metadata][generation_name]"}, 401, "auth_error", "None",
			"Authentication Error, BadRequest please pass param=[metadata][generation_name] in request body. This is a required param"},
		{&pipeline.EndUserBlocked{ID: "eu1"}, 403, "permission_error", "", "End user eu1 is blocked."},
		{&pipeline.CacheControlRefused{Control: "no-cache"}, 403, "permission_error", "",
			"Not allowed to set no-cache as a cache control. Contact admin to change permissions."},
		{fmt.Errorf("wrapped: %w", &pipeline.Unavailable{Err: &spend.UnavailableError{Err: errors.New("down")}}), 503, "service_unavailable", "",
			"database unavailable: the budget of this key is held in Postgres, which is unreachable, and this replica has not read its spend yet: down"},
	} {
		status, body := render(t, s, "/v1/chat/completions", tc.err)
		require.Equal(t, tc.status, status, body)
		require.Equal(t, tc.typ, gjson.Get(body, "error.type").Str, body)
		require.Equal(t, tc.msg, gjson.Get(body, "error.message").Str, body)
		require.Equal(t, tc.param, gjson.Get(body, "error.param").Str, body)
	}
}

// A2A answers the same errors with JSON-RPC codes (agentCompleter).
func TestCallErrorA2A(t *testing.T) {
	agent := &a2a.Agent{Model: "m"}
	var ae *a2a.Error
	require.ErrorAs(t, a2aError(&pipeline.AccessDenied{Scope: "key", Model: "m"}, agent), &ae)
	require.Equal(t, a2a.CodeUnauthorized, ae.Code)
	require.Equal(t, map[string]any{"type": "key_model_access_denied", "model": "m"}, ae.Data)
	require.ErrorAs(t, a2aError(&pipeline.AccessDenied{Scope: "user", Model: "m"}, agent), &ae)
	require.Equal(t, a2a.CodeUnauthenticated, ae.Code)
	require.ErrorAs(t, a2aError(&pipeline.BudgetExceeded{Spend: 2, Max: 1}, agent), &ae)
	require.Equal(t, a2a.CodeInternalError, ae.Code)
	require.Equal(t, map[string]any{"type": "budget_exceeded", "status": 400}, ae.Data)
	require.ErrorAs(t, a2aError(&pipeline.KeyUnusable{Why: "key expired"}, agent), &ae)
	require.Equal(t, a2a.CodeUnauthenticated, ae.Code)
	require.Equal(t, map[string]any{"type": "authentication_error", "model": "m"}, ae.Data)
	require.ErrorAs(t, a2aError(&pipeline.Blocked{BlockedError: &guardrail.BlockedError{Guardrail: "g", Message: "Content blocked: x"}, Input: true}, agent), &ae)
	require.Equal(t, a2a.CodeInvalidParams, ae.Code)
	require.Equal(t, map[string]any{"guardrail": "g"}, ae.Data)
}
