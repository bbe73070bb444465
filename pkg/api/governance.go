package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"lockstep/pkg/keys"
	"lockstep/pkg/limits"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// The limits and spend steps of the call pipeline (pipeline.go; API.md "Keys (admin) and their
// limits"): governance is the Admitter New installs when the server has a Limiter or a Spend
// tracker. Admit runs before the upstream call (budget, then rpm/tpm/parallel leases); the
// Ticket's Done runs after it (spend log with cost, tokens settled, parallel slot freed).
type governance struct{ s *Server }

var _ Admitter = governance{}

// govCall is one admitted upstream call of the limits and spend steps.
type govCall struct {
	s        *Server
	token    string // the caller's key token (the master key's for the admin; "" with no master key)
	ticket   limits.Ticket
	limited  bool
	callType string
	model    string
	id       string // the call id (CallInfo.CallID): the spend log's request_id
	start    time.Time
	done     atomic.Bool
	// owners are the call's user, team, organization and end user (owners.go); ownerTickets
	// their rate-limit admissions.
	owners       []owner
	ownerTickets []limits.Ticket
}

// Admit runs the budget and limit checks for a call, and sets the rate-limit headers of a
// limited key on the response (also when refusing). Errors: 400 budget_exceeded, 429
// rate_limit_error with Retry-After, 503 when a limited key's leases or spend cannot be read
// from Postgres.
func (g governance) Admit(ctx context.Context, ci CallInfo) (Ticket, error) {
	s := g.s
	gc := &govCall{s: s, callType: ci.Route, model: ci.Model, start: time.Now(), id: ci.CallID}
	h := ci.Header
	if h == nil {
		h = http.Header{}
	}
	k := ci.Key
	switch {
	case k != nil:
		gc.token = k.Token
	case s.MasterKey != "":
		gc.token = s.masterToken
	}
	gc.owners = callOwners(ci)
	if k == nil {
		if err := s.ownerBudgets(ctx, h, gc.owners); err != nil {
			return nil, err
		}
		var err error
		if gc.ownerTickets, err = s.ownerLimits(ctx, h, gc.owners); err != nil {
			return nil, err
		}
		gc.setOwnerRateHeaders(h, limits.Status{LimitRequests: -1, LimitTokens: -1})
		return gc, nil
	}
	if k.Budget.Has && s.Spend != nil {
		if err := s.Spend.Check(ctx, k.Token, k.Budget); err != nil {
			return nil, s.govError(h, k, err)
		}
	}
	// the owners' budgets (user, team, organization, end user) before any lease is taken
	if err := s.ownerBudgets(ctx, h, gc.owners); err != nil {
		return nil, err
	}
	if k.Limits.Any() {
		if s.Limiter == nil {
			return nil, s.govError(h, k, &limits.UnavailableError{Kind: limits.KindRequests, Err: errors.New("no database configured")})
		}
		t, err := s.Limiter.Admit(ctx, k.Token, k.Limits)
		if err != nil {
			setRateHeaders(h, s.Limiter.Status(k.Token, k.Limits))
			return nil, s.govError(h, k, err)
		}
		gc.ticket, gc.limited = t, true
		setRateHeaders(h, t.Status())
	}
	var err error
	if gc.ownerTickets, err = s.ownerLimits(ctx, h, gc.owners); err != nil {
		if gc.limited {
			gc.ticket.Done(0)
		}
		return nil, err
	}
	keySt := limits.Status{LimitRequests: -1, LimitTokens: -1}
	if gc.limited {
		keySt = gc.ticket.Status()
	}
	gc.setOwnerRateHeaders(h, keySt)
	return gc, nil
}

// setOwnerRateHeaders sets the x-ratelimit-* headers from the tightest of the key's own
// status st and its owners' (user, team, member, organization, end user) limits: per kind,
// the one with the least remaining, as LiteLLM's parallel_request_limiter_v3 reports the
// descriptor closest to its limit. A key limited only through its team gets them too.
func (g *govCall) setOwnerRateHeaders(h http.Header, st limits.Status) {
	if len(g.ownerTickets) == 0 {
		return
	}
	for _, t := range g.ownerTickets {
		o := t.Status()
		if o.LimitRequests >= 0 && (st.LimitRequests < 0 || o.RemainingRequests < st.RemainingRequests) {
			st.LimitRequests, st.RemainingRequests = o.LimitRequests, o.RemainingRequests
		}
		if o.LimitTokens >= 0 && (st.LimitTokens < 0 || o.RemainingTokens < st.RemainingTokens) {
			st.LimitTokens, st.RemainingTokens = o.LimitTokens, o.RemainingTokens
		}
	}
	setRateHeaders(h, st)
}

func setRateHeaders(h http.Header, st limits.Status) {
	if st.LimitRequests >= 0 {
		h.Set("x-ratelimit-limit-requests", strconv.FormatInt(st.LimitRequests, 10))
		h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(st.RemainingRequests, 10))
	}
	if st.LimitTokens >= 0 {
		h.Set("x-ratelimit-limit-tokens", strconv.FormatInt(st.LimitTokens, 10))
		h.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(st.RemainingTokens, 10))
	}
}

// rateLimitError is the 429 of a limit reached by subject (api_key, user, team, organization,
// end_user) id, with Retry-After in whole seconds (at least 1). The text is LiteLLM's
// parallel_request_limiter_v3 one.
func rateLimitError(h http.Header, subject, id string, le *limits.LimitError) error {
	secs := int64(math.Ceil(le.RetryAfter.Seconds()))
	if secs < 1 {
		secs = 1
	}
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	reset := le.ResetAt
	if reset.IsZero() {
		reset = time.Now().Add(time.Duration(secs) * time.Second)
	}
	return &Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Message: fmt.Sprintf(
		"Rate limit exceeded for %s: %s. Limit type: %s. Current limit: %d, Remaining: 0. Limit resets at: %s",
		subject, id, le.Kind, le.Limit, reset.UTC().Format("2006-01-02 15:04:05 UTC"))}
}

// govError maps a limits or spend refusal to its API error, counting it.
func (s *Server) govError(h http.Header, k *keys.Key, err error) error {
	var le *limits.LimitError
	var lu *limits.UnavailableError
	var be *spend.BudgetError
	var su *spend.UnavailableError
	switch {
	case errors.As(err, &le):
		return rateLimitError(h, "api_key", k.Token, le)
	case errors.As(err, &be):
		s.metrics.budgetRejections.Inc()
		return &Error{Status: http.StatusBadRequest, Type: "budget_exceeded", Message: be.Error()}
	case errors.As(err, &lu):
		return &Error{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Message: "database unavailable: " + lu.Error()}
	case errors.As(err, &su):
		s.metrics.budgetRejections.Inc()
		return &Error{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Message: "database unavailable: " + su.Error()}
	}
	return err
}

// Done ends the call: the spend log (cost from the deployment's model_info) and the tokens
// the upstream reported. Only the first call counts.
func (g *govCall) Done(o Outcome) {
	if !g.done.CompareAndSwap(false, true) {
		return
	}
	total := o.Usage.PromptTokens + o.Usage.CompletionTokens
	if g.limited {
		g.ticket.Done(total)
	}
	for _, t := range g.ownerTickets {
		t.Done(total)
	}
	if g.s.Spend == nil || (g.token == "" && len(g.owners) == 0) {
		return
	}
	id := g.id
	if id == "" {
		id = g.s.nextSpendID()
	}
	l := store.SpendLog{RequestID: id, APIKey: g.token, CallType: g.callType, Model: g.model,
		PromptTokens: o.Usage.PromptTokens, CompletionTokens: o.Usage.CompletionTokens, TotalTokens: total,
		StartTime: g.start, EndTime: time.Now(), ReplicaID: g.s.ReplicaID, Status: "success"}
	if o.Err != nil {
		l.Status = "failure"
	}
	for _, ow := range g.owners {
		switch ow.kind {
		case "user":
			l.User = ow.id
		case "team":
			l.TeamID = ow.id
		case "organization":
			l.OrganizationID = ow.id
		case "end_user":
			l.EndUser = ow.id
		}
	}
	if d := o.Deployment; d != nil {
		l.ModelID = d.ModelID
		l.ModelGroup = d.Group()
		l.Spend = spend.Cost(d.ModelInfo, o.Usage.PromptTokens, o.Usage.CompletionTokens)
	}
	g.s.Spend.Record(l)
	g.s.exportSpendLog(&l) // structured log line, OTLP log record (tracing.go)
}

// nextSpendID is a spend log's request_id: unique across replicas and restarts.
func (s *Server) nextSpendID() string {
	n := s.spendSeq.Add(1)
	return s.spendPrefix + strconv.FormatInt(n, 36)
}
