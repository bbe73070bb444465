package api

import (
	"errors"
	"net/http"
	"strconv"

	pipeline "lockstep/pkg/call"
)

// governance is the Admitter New installs when the server has a Limiter or a Spend tracker
// (pipeline.Governance).
func (s *Server) governance() *pipeline.Governance {
	return &pipeline.Governance{Limiter: s.Limiter, Spend: s.Spend, MasterToken: s.masterToken, ReplicaID: s.ReplicaID,
		NewID: s.nextSpendID, Rejected: func() { s.metrics.budgetRejections.Inc() }, Export: s.exportSpendLog,
		ProxyBudget: s.ProxyBudget}
}

// callError is the API error of the call pipeline's typed errors (pkg/call): a model access
// denial 401 <scope>_model_access_denied (param "model"); an unknown model 400
// invalid_request_error (param "model"); the limits step's refusals
// (pipeline.Admitter) 429 rate_limit_error (Retry-After was set by Admit), 400
// budget_exceeded, 503 service_unavailable; nil for any other error.
func callError(err error) *Error {
	var ad *pipeline.AccessDenied
	var um *pipeline.UnknownModel
	switch {
	case errors.As(err, &ad):
		return &Error{Status: http.StatusUnauthorized, Type: ad.Type(), Param: "model", Message: ad.Error()}
	case errors.As(err, &um):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "model", Message: um.Error()}
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

// nextSpendID is a spend log's request_id: unique across replicas and restarts.
func (s *Server) nextSpendID() string {
	n := s.spendSeq.Add(1)
	return s.spendPrefix + strconv.FormatInt(n, 36)
}
