package api

import (
	"errors"
	"net/http"

	"lockstep/pkg/accounts"
	pipeline "lockstep/pkg/call"
)

// Admitter, Ticket, CallInfo and Outcome are the limits step's contract (pkg/call).
type (
	Admitter = pipeline.Admitter
	Ticket   = pipeline.Ticket
	CallInfo = pipeline.CallInfo
	Outcome  = pipeline.Outcome
)

// governance is the Admitter New installs when the server has a Limiter or a Spend tracker
// (pipeline.Governance).
func (s *Server) governance() *pipeline.Governance {
	return &pipeline.Governance{Limiter: s.Limiter, Spend: s.Spend, MasterToken: s.masterToken, ReplicaID: s.ReplicaID,
		NewID: s.ids.Next, Rejected: func() { s.metrics.budgetRejections.Inc() }, Export: s.exportSpendLog,
		Budgets: s.budgetByID, ProxyBudget: s.ProxyBudget}
}

// budgetByID is the budget id as this replica's budgets registry holds it (nil: none).
func (s *Server) budgetByID(id string) *accounts.Budget {
	if s.Budgets == nil {
		return nil
	}
	if e, ok := s.Budgets.Load().ByID(id); ok {
		return e.Value
	}
	return nil
}

// callError is the API error of the call pipeline's typed errors (pkg/call): a model access
// denial 401 <scope>_model_access_denied (param "model"); an unknown model 400
// invalid_request_error (param "model"); a client input error 400 invalid_request_error; an
// unknown guardrail or policy 404 not_found_error; a key blocked or expired during the access
// re-check 401 authentication_error; a missing enforced param 401 auth_error (param
// "None"); a blocked end user 403 permission_error; a cache control the key may not set 403; the limits step's refusals
// (pipeline.Admitter) 429 rate_limit_error (Retry-After was set by Admit), 400
// budget_exceeded, 503 service_unavailable; nil for any other error. Every message is the
// error's own text.
func callError(err error) *Error {
	var ad *pipeline.AccessDenied
	var um *pipeline.UnknownModel
	var in *pipeline.Invalid
	var ug *pipeline.UnknownGuardrail
	var up *pipeline.UnknownPolicy
	var ku *pipeline.KeyUnusable
	var mp *pipeline.MissingParam
	var eb *pipeline.EndUserBlocked
	var cc *pipeline.CacheControlRefused
	switch {
	case errors.As(err, &ad):
		return &Error{Status: http.StatusUnauthorized, Type: ad.Type(), Param: "model", Message: ad.Error()}
	case errors.As(err, &um):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "model", Message: um.Error()}
	case errors.As(err, &in):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: in.Error()}
	case errors.As(err, &ug):
		return &Error{Status: http.StatusNotFound, Type: "not_found_error", Message: ug.Error()}
	case errors.As(err, &up):
		return &Error{Status: http.StatusNotFound, Type: "not_found_error", Message: up.Error()}
	case errors.As(err, &ku):
		return &Error{Status: http.StatusUnauthorized, Type: statusType(http.StatusUnauthorized), Message: ku.Error()}
	case errors.As(err, &mp):
		return &Error{Status: http.StatusUnauthorized, Type: "auth_error", Param: "None", Message: mp.Error()}
	case errors.As(err, &eb):
		return &Error{Status: http.StatusForbidden, Type: "permission_error", Message: eb.Error()}
	case errors.As(err, &cc):
		return &Error{Status: http.StatusForbidden, Type: statusType(http.StatusForbidden), Message: cc.Error()}
	}
	return admitError(err)
}

// admitError is the API error of a refusal by the limits step (pipeline.Admitter); nil for
// any other error.
func admitError(err error) *Error {
	var rl *pipeline.RateLimited
	var be *pipeline.BudgetExceeded
	var un *pipeline.Unavailable
	switch {
	case errors.As(err, &rl):
		return &Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Message: rl.Error()}
	case errors.As(err, &be):
		return &Error{Status: http.StatusBadRequest, Type: "budget_exceeded", Message: be.Error()}
	case errors.As(err, &un):
		return &Error{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Message: un.Error()}
	}
	return nil
}
