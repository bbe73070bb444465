package call

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/limits"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// Governance is the limits and spend steps of the call pipeline (API.md "Keys (admin) and
// their limits"): the Admitter the server installs when it has a Limiter or a Spend tracker.
// Admit runs before the upstream call (budget, then rpm/tpm/parallel leases); the Ticket's
// Done runs after it (spend log with cost, tokens settled, parallel slot freed).
type Governance struct {
	// Limiter enforces rpm_limit, tpm_limit and max_parallel_requests cluster-wide; nil
	// without a database (a limited caller is then refused 503).
	Limiter *limits.Limiter
	// Spend records spend logs and checks budgets; nil: neither.
	Spend *spend.Tracker
	// MasterToken is the sha256 of the master key (keys.Hash): the api_key of the admin's
	// spend logs; "" with no master key.
	MasterToken string
	// ReplicaID is the spend logs' replica_id.
	ReplicaID string
	// NewID is a spend log's request_id for a call without CallInfo.CallID.
	NewID func() string
	// Rejected counts a budget refusal (lockstep_budget_rejections_total); nil: not counted.
	Rejected func()
	// Export is told every spend log after it is recorded (the structured log line and OTLP
	// log record); nil: none.
	Export func(*store.SpendLog)
	// Budgets looks a budget up by budget_id in this replica's budgets registry (sql/012;
	// nil, or a budget it does not hold: the object's own limits only). Never reads
	// Postgres: a budget written anywhere reaches the registry by the change feed.
	Budgets func(id string) *accounts.Budget
	// ProxyBudget is the proxy-wide budget (litellm_settings max_budget, budget_duration;
	// zero: none): every call's spend counts toward the user store.ProxyBudgetUser, and a
	// virtual key's call is refused once that spend reached Max (LiteLLM common_checks'
	// global proxy budget; the master key is not refused, as LiteLLM's skips those checks).
	ProxyBudget spend.Budget
}

// budget is the budget named id ("" or unknown: nil).
func (g *Governance) budget(id string) *accounts.Budget {
	if id == "" || g.Budgets == nil {
		return nil
	}
	return g.Budgets(id)
}

var _ Admitter = (*Governance)(nil)

// govCall is one admitted upstream call of the limits and spend steps.
type govCall struct {
	g        *Governance
	token    string // the caller's key token (the master key's for the admin; "" with no master key)
	ticket   limits.Ticket
	limited  bool
	callType string
	model    string
	id       string // the call id (CallInfo.CallID): the spend log's request_id
	// keyAlias and teamAlias are the key's and its team's aliases (spend log metadata)
	keyAlias, teamAlias string
	tags                []string // the request's metadata.tags
	start               time.Time
	done                atomic.Bool
	// owners are the call's user, team, organization and end user (owners.go); ownerTickets
	// their rate-limit admissions.
	owners       []owner
	ownerTickets []limits.Ticket
	// modelBudgets are the call's per-model budgets (model_budgets.go).
	modelBudgets []modelBudget
}

// Admit runs the budget and limit checks for a call, and sets the rate-limit headers of a
// limited key on the response (also when refusing). Errors: *BudgetExceeded, *RateLimited
// (Retry-After set), *Unavailable when a limited key's leases or spend cannot be read from
// Postgres.
func (g *Governance) Admit(ctx context.Context, ci CallInfo) (Ticket, error) {
	gc := &govCall{g: g, callType: ci.Route, model: ci.Model, start: time.Now(), id: ci.CallID, tags: ci.Tags}
	h := ci.Header
	if h == nil {
		h = http.Header{}
	}
	k := ci.Key
	switch {
	case k != nil:
		gc.token, gc.keyAlias = k.Token, k.Alias
	case g.MasterToken != "":
		gc.token = g.MasterToken
	}
	if ci.Team != nil && ci.Team.Alias != nil {
		gc.teamAlias = *ci.Team.Alias
	}
	if k != nil && g.ProxyBudget.Has && g.Spend != nil {
		if err := g.Spend.Check(ctx, store.OwnerToken("user", store.ProxyBudgetUser), g.ProxyBudget); err != nil {
			return nil, g.refusal(h, k, err)
		}
	}
	gc.owners = g.callOwners(ci)
	if k == nil {
		if err := g.ownerBudgets(ctx, h, gc.owners); err != nil {
			return nil, err
		}
		var err error
		if gc.ownerTickets, err = g.ownerLimits(ctx, h, gc.owners); err != nil {
			return nil, err
		}
		gc.setOwnerRateHeaders(h, limits.Status{LimitRequests: -1, LimitTokens: -1})
		return gc, nil
	}
	// the key's own limits held together with its budget's (LiteLLM key budget_id)
	// (max_budget raised by temp_budget_increase until temp_budget_expiry)
	keyLim, keyBud := accounts.WithBudget(k.Limits, k.MaxBudgetAt(time.Now()), g.budget(k.X().BudgetID))
	if keyBud.Has && g.Spend != nil {
		if err := g.Spend.Check(ctx, k.Token, keyBud); err != nil {
			return nil, g.refusal(h, k, err)
		}
	}
	// the owners' budgets (user, team, organization, end user) before any lease is taken,
	// then the per-model budgets (model_max_budget)
	if err := g.ownerBudgets(ctx, h, gc.owners); err != nil {
		return nil, err
	}
	gc.modelBudgets = g.callModelBudgets(ci)
	if err := g.checkModelBudgets(ctx, h, gc.modelBudgets); err != nil {
		return nil, err
	}
	if keyLim.Any() {
		if g.Limiter == nil {
			return nil, g.refusal(h, k, &limits.UnavailableError{Kind: limits.KindRequests, Err: errors.New("no database configured")})
		}
		t, err := g.Limiter.Admit(ctx, k.Token, keyLim)
		if err != nil {
			SetRateHeaders(h, g.Limiter.Status(k.Token, keyLim))
			return nil, g.refusal(h, k, err)
		}
		gc.ticket, gc.limited = t, true
		SetRateHeaders(h, t.Status())
	}
	var err error
	if gc.ownerTickets, err = g.ownerLimits(ctx, h, gc.owners); err != nil {
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
func (gc *govCall) setOwnerRateHeaders(h http.Header, st limits.Status) {
	if len(gc.ownerTickets) == 0 {
		return
	}
	for _, t := range gc.ownerTickets {
		o := t.Status()
		if o.LimitRequests >= 0 && (st.LimitRequests < 0 || o.RemainingRequests < st.RemainingRequests) {
			st.LimitRequests, st.RemainingRequests = o.LimitRequests, o.RemainingRequests
		}
		if o.LimitTokens >= 0 && (st.LimitTokens < 0 || o.RemainingTokens < st.RemainingTokens) {
			st.LimitTokens, st.RemainingTokens = o.LimitTokens, o.RemainingTokens
		}
	}
	SetRateHeaders(h, st)
}

// SetRateHeaders sets the x-ratelimit-limit-requests / -remaining-requests (with an rpm
// limit) and -limit-tokens / -remaining-tokens (with a tpm limit) headers from st.
func SetRateHeaders(h http.Header, st limits.Status) {
	if st.LimitRequests >= 0 {
		h.Set("x-ratelimit-limit-requests", strconv.FormatInt(st.LimitRequests, 10))
		h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(st.RemainingRequests, 10))
	}
	if st.LimitTokens >= 0 {
		h.Set("x-ratelimit-limit-tokens", strconv.FormatInt(st.LimitTokens, 10))
		h.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(st.RemainingTokens, 10))
	}
}

// rateLimited is the *RateLimited of a limit reached by subject (api_key, user, team,
// organization, end_user) id, with Retry-After set in whole seconds (at least 1).
func rateLimited(h http.Header, subject, id string, le *limits.LimitError) error {
	secs := int64(math.Ceil(le.RetryAfter.Seconds()))
	if secs < 1 {
		secs = 1
	}
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	reset := le.ResetAt
	if reset.IsZero() {
		reset = time.Now().Add(time.Duration(secs) * time.Second)
	}
	return &RateLimited{Subject: subject, ID: id, Kind: le.Kind, Limit: le.Limit, ResetAt: reset}
}

// refusal maps a limits or spend refusal of key k to the pipeline's typed error, counting it.
func (g *Governance) refusal(h http.Header, k *keys.Key, err error) error {
	var le *limits.LimitError
	var lu *limits.UnavailableError
	var be *spend.BudgetError
	var su *spend.UnavailableError
	switch {
	case errors.As(err, &le):
		return rateLimited(h, "api_key", k.Token, le)
	case errors.As(err, &be):
		g.rejected()
		return &BudgetExceeded{Spend: be.Spend, Max: be.Max}
	case errors.As(err, &lu):
		return &Unavailable{Err: lu}
	case errors.As(err, &su):
		g.rejected()
		return &Unavailable{Err: su}
	}
	return err
}

func (g *Governance) rejected() {
	if g.Rejected != nil {
		g.Rejected()
	}
}

// Done ends the call: the spend log (cost from the deployment's model_info) and the tokens
// the upstream reported. Only the first call counts.
func (gc *govCall) Done(o Outcome) {
	if !gc.done.CompareAndSwap(false, true) {
		return
	}
	total := o.Usage.PromptTokens + o.Usage.CompletionTokens
	if gc.limited {
		gc.ticket.Done(total)
	}
	for _, t := range gc.ownerTickets {
		t.Done(total)
	}
	g := gc.g
	if g.Spend == nil || (gc.token == "" && len(gc.owners) == 0) {
		return
	}
	id := gc.id
	if id == "" && g.NewID != nil {
		id = g.NewID()
	}
	l := store.SpendLog{RequestID: id, APIKey: gc.token, CallType: gc.callType, Model: gc.model,
		PromptTokens: o.Usage.PromptTokens, CompletionTokens: o.Usage.CompletionTokens, TotalTokens: total,
		StartTime: gc.start, EndTime: time.Now(), ReplicaID: g.ReplicaID, Status: "success",
		ResponseID: o.ResponseID, KeyAlias: gc.keyAlias, TeamAlias: gc.teamAlias, ProxyBudget: g.ProxyBudget.Has, RequestTags: gc.tags,
		ExtraTokens: modelBudgetTokens(gc.modelBudgets)}
	if o.Err != nil {
		l.Status = "failure"
	}
	for _, ow := range gc.owners {
		switch ow.kind {
		case "user":
			l.User = ow.id
		case "team":
			l.TeamID = ow.id
		case "organization":
			l.OrganizationID = ow.id
		case "end_user":
			l.EndUser = ow.id
		case "org_member": // only for a member with a budget in the organization
			l.ExtraTokens = append(l.ExtraTokens, ow.token())
		case "project": // the key's project: its spend total and the log's project_id
			l.ExtraTokens = append(l.ExtraTokens, ow.token())
			l.ProjectID = ow.id
		}
	}
	if d := o.Deployment; d != nil {
		l.ModelID = d.ModelID
		l.ModelGroup = d.Group()
		l.Spend = spend.Cost(d.ModelInfo, o.Usage.PromptTokens, o.Usage.CompletionTokens)
		if o.Images > 0 {
			l.Spend += spend.ImageCost(d.ModelInfo, o.Images)
		}
	}
	g.Spend.Record(l)
	if g.Export != nil {
		g.Export(&l) // structured log line, OTLP log record (pkg/api tracing.go)
	}
}
