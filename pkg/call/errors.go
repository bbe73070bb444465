package call

import (
	"fmt"
	"strings"
	"time"

	"lockstep/pkg/guardrail"
	"lockstep/pkg/spend"
)

// RateLimited is a call refused because a rate or parallel-request limit is reached (HTTP 429
// rate_limit_error; Admit has set Retry-After, in whole seconds, at least 1). Error is
// LiteLLM's parallel_request_limiter_v3 text: `Rate limit exceeded for <Subject>: <ID>. Limit
// type: <Kind>. Current limit: <Limit>, Remaining: 0. Limit resets at: <ResetAt UTC>`.
type RateLimited struct {
	// Subject is who is limited: api_key, user, team, team_member, organization or end_user.
	Subject string
	// ID is the subject's id (a key's token hash).
	ID string
	// Kind is limits.KindRequests, KindTokens or KindParallel.
	Kind    string
	Limit   int64
	ResetAt time.Time
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("Rate limit exceeded for %s: %s. Limit type: %s. Current limit: %d, Remaining: 0. Limit resets at: %s",
		e.Subject, e.ID, e.Kind, e.Limit, e.ResetAt.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// BudgetExceeded is a call refused because a spend reached its max_budget (HTTP 400
// budget_exceeded). Error is LiteLLM's text: for the key `Budget has been exceeded! Current
// cost: <spend>, Max budget: <max>`; for an owner `Budget has been exceeded! <Who> Current
// cost: <spend>, Max budget: <max>` (numbers as Python prints floats, spend.PyFloat).
type BudgetExceeded struct {
	// Who names the owner ("Team=<id>", "User=<u> in Team=<t>", ...); "" for the key itself.
	Who        string
	Spend, Max float64
	// Msg, when set, is the whole text: a per-model budget's (LiteLLM model_max_budget_limiter:
	// `LiteLLM Virtual Key: <token>, key_alias: <alias>, exceeded budget for model=<model>`).
	Msg string
}

func (e *BudgetExceeded) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	if e.Who == "" {
		return (&spend.BudgetError{Spend: e.Spend, Max: e.Max}).Error()
	}
	return fmt.Sprintf("Budget has been exceeded! %s Current cost: %s, Max budget: %s", e.Who, spend.PyFloat(e.Spend), spend.PyFloat(e.Max))
}

// Unavailable is a call refused because a limited or budgeted caller's leases or spend cannot
// be read from Postgres (HTTP 503 service_unavailable); Err is the *limits.UnavailableError or
// *spend.UnavailableError. Error is `database unavailable: <Err>`.
type Unavailable struct{ Err error }

func (e *Unavailable) Error() string { return "database unavailable: " + e.Err.Error() }

func (e *Unavailable) Unwrap() error { return e.Err }

// UnknownModel is a call naming no model group (or agent) this gateway serves (HTTP 400
// invalid_request_error, param "model"). Error is LiteLLM's text: `<Route>: Invalid model name
// passed in model=<Model>. Call /v1/models to view available models for your key.`, with
// Model "None" when the request named none.
type UnknownModel struct {
	// Route is the route's LiteLLM name (format.Format.RouteName: "chat_completion",
	// "anthropic_messages", ...).
	Route string
	Model string
}

func (e *UnknownModel) Error() string {
	m := e.Model
	if m == "" {
		m = "None"
	}
	return fmt.Sprintf("%s: Invalid model name passed in model=%s. Call /v1/models to view available models for your key.", e.Route, m)
}

// AccessDenied is a call refused because the caller may not use the model (HTTP 401, type
// <Scope>_model_access_denied, param "model"). Error is LiteLLM's text (can_key_call_model,
// can_team_access_model): `<Scope> not allowed to access model. This <Scope> can only access
// models=[<Allowed>]. Tried to access <Model>`.
type AccessDenied struct {
	// Scope is the list that refused: "key", "project", "team" or "user".
	Scope string
	// Allowed is that list's models (a Python list in the text).
	Allowed []string
	Model   string
}

func (e *AccessDenied) Error() string {
	return fmt.Sprintf("%s not allowed to access model. This %s can only access models=%s. Tried to access %s", e.Scope, e.Scope, pyList(e.Allowed), e.Model)
}

// Type is the error type: key_model_access_denied, team_model_access_denied or
// user_model_access_denied.
func (e *AccessDenied) Type() string { return e.Scope + "_model_access_denied" }

// Blocked is a guardrail's BLOCK in the pipeline; Input is true for pre_call and during_call,
// false for post_call. LLM routes answer it 400 invalid_request_error with the content
// filter's message; A2A with -32602 (input) or -32603 (output).
type Blocked struct {
	*guardrail.BlockedError
	Input bool
}

func (b *Blocked) Unwrap() error { return b.BlockedError }

// pyList renders items as Python prints a list of strings: ['a', 'b'].
func pyList(items []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + s + "'")
	}
	b.WriteByte(']')
	return b.String()
}

// Invalid is a client's request the pipeline refuses before any upstream work (HTTP 400
// invalid_request_error): a request hook that is not the documented type, a malformed
// "guardrails" or "fallbacks" member, a body a guardrail cannot read. Field names the
// member ("" when it is the whole body); Error is Msg, the text pkg/api answers word for
// word (API.md "Request bodies", "Compatibility policy").
type Invalid struct {
	Field string
	Msg   string
}

func (e *Invalid) Error() string { return e.Msg }

// invalid is an *Invalid of field with a formatted message.
func invalid(field, format string, args ...any) *Invalid {
	return &Invalid{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// UnknownGuardrail is a call naming a guardrail that does not exist (after read-through): in
// the request, the caller's key or team, or the agent's litellm_params (HTTP 404
// not_found_error). Error is LiteLLM's text: `Guardrail '<Name>' not found. Please ensure the
// guardrail is configured in your LiteLLM proxy.`
type UnknownGuardrail struct{ Name string }

func (e *UnknownGuardrail) Error() string {
	return fmt.Sprintf("Guardrail '%s' not found. Please ensure the guardrail is configured in your LiteLLM proxy.", e.Name)
}

// UnknownPolicy is a call whose key or team attaches a guardrail policy that does not exist
// (after read-through), or whose policy inherits one that does not (HTTP 404
// not_found_error): the call fails closed. Error is `Policy '<Name>' not found. Please ensure
// the policy exists (/policies/list).`
type UnknownPolicy struct{ Name string }

func (e *UnknownPolicy) Error() string {
	return fmt.Sprintf("Policy '%s' not found. Please ensure the policy exists (/policies/list).", e.Name)
}

// KeyUnusable is a call whose virtual key was blocked or expired while its model access was
// re-checked (HTTP 401 authentication_error; A2A -31401). Why is keys.Key.Usable's reason;
// Error is `Authentication Error, <Why>.`
type KeyUnusable struct{ Why string }

func (e *KeyUnusable) Error() string { return "Authentication Error, " + e.Why + "." }

// MissingParam is a call whose body lacks one of its key's enforced_params (LiteLLM
// auth_checks _enforced_params_check, raised inside user_api_key_auth: HTTP 401 auth_error,
// param "None"). Name is "user" or "[metadata][generation_name]" for a nested one; Error is
// `Authentication Error, BadRequest please pass param=<Name> in request body. This is a
// required param`.
type MissingParam struct{ Name string }

func (e *MissingParam) Error() string {
	return "Authentication Error, BadRequest please pass param=" + e.Name + " in request body. This is a required param"
}

// EndUserBlocked is a call made for a blocked end user (HTTP 403 permission_error). Error is
// `End user <ID> is blocked.`
type EndUserBlocked struct{ ID string }

func (e *EndUserBlocked) Error() string { return "End user " + e.ID + " is blocked." }

// CacheControlRefused is a call whose body's "cache" object sets a control its key's
// allowed_cache_controls does not list (LiteLLM hooks/cache_control_check.py: HTTP 403
// permission_error). Error is `Not allowed to set <Control> as a cache control. Contact admin
// to change permissions.`
type CacheControlRefused struct{ Control string }

func (e *CacheControlRefused) Error() string {
	return "Not allowed to set " + e.Control + " as a cache control. Contact admin to change permissions."
}
