package call

import (
	"context"
	"errors"
	"net/http"

	"lockstep/pkg/spend"
)

// modelBudget is one per-model budget a call is held to (LiteLLM model_max_budget, its
// model_max_budget_limiter): the spend of one key, user, end user, project or organization on one model
// group, kept cluster-wide like every spend total (gateway.key_spend under token; the spend
// log names it in ExtraTokens), reset every budget_duration.
type modelBudget struct {
	token string
	bud   spend.Budget
	msg   string // the refusal's text
}

// callModelBudgets lists the per-model budgets of a call to model group ci.Model: the key's own
// model_max_budget (else its linked budget's), its user's, and the linked budgets' of the end
// user, the key's project (sql/020) and the organization. Refusal texts are LiteLLM's:
// `LiteLLM Virtual Key: <token>, key_alias: <alias|None>, exceeded budget for model=<model>`,
// `LiteLLM User: <id>, ...`, `LiteLLM End User: <id>, ...`, `LiteLLM Organization: <id>, ...`
// (a project's, `LiteLLM Project: <id>, ...`, in the same words).
func (g *Governance) callModelBudgets(ci CallInfo) []modelBudget {
	var out []modelBudget
	m := ci.Model
	if k := ci.Key; k != nil {
		b, ok := k.X().ModelBudgets[m]
		if !ok {
			if lb := g.budget(k.X().BudgetID); lb != nil {
				b, ok = lb.ModelBudgets[m]
			}
		}
		if ok {
			alias := k.Alias
			if alias == "" {
				alias = "None"
			}
			out = append(out, newModelBudget("key", k.Token, "LiteLLM Virtual Key: "+k.Token+", key_alias: "+alias, m, b))
		}
	}
	if u := ci.User; u != nil {
		if b, ok := u.ModelBudgets[m]; ok {
			out = append(out, newModelBudget("user", u.ID, "LiteLLM User: "+u.ID, m, b))
		}
	}
	if e := ci.EndUser; e != nil {
		if lb := g.budget(e.Links.BudgetID); lb != nil {
			if b, ok := lb.ModelBudgets[m]; ok {
				out = append(out, newModelBudget("end_user", e.ID, "LiteLLM End User: "+e.ID, m, b))
			}
		}
	}
	if pr := ci.Project; pr != nil {
		if lb := g.budget(pr.Budget()); lb != nil {
			if b, ok := lb.ModelBudgets[m]; ok {
				out = append(out, newModelBudget("project", pr.ID, "LiteLLM Project: "+pr.ID, m, b))
			}
		}
	}
	if o := ci.Organization; o != nil {
		if lb := g.budget(o.Links.BudgetID); lb != nil {
			if b, ok := lb.ModelBudgets[m]; ok {
				out = append(out, newModelBudget("organization", o.ID, "LiteLLM Organization: "+o.ID, m, b))
			}
		}
	}
	return out
}

func newModelBudget(kind, id, who, model string, b spend.Budget) modelBudget {
	return modelBudget{token: "model_budget:" + kind + ":" + id + ":" + model, bud: b, msg: who + ", exceeded budget for model=" + model}
}

// checkModelBudgets refuses the call when a per-model budget's spend reached its max: a
// *BudgetExceeded with the budget's text (400 budget_exceeded).
func (g *Governance) checkModelBudgets(ctx context.Context, h http.Header, mbs []modelBudget) error {
	if g.Spend == nil {
		return nil
	}
	for _, mb := range mbs {
		err := g.Spend.Check(ctx, mb.token, mb.bud)
		if err == nil {
			continue
		}
		var be *spend.BudgetError
		if errors.As(err, &be) {
			g.rejected()
			return &BudgetExceeded{Msg: mb.msg, Spend: be.Spend, Max: be.Max}
		}
		return g.refusal(h, nil, err)
	}
	return nil
}

// modelBudgetTokens are the key_spend tokens of mbs (the spend log's ExtraTokens).
func modelBudgetTokens(mbs []modelBudget) []string {
	if len(mbs) == 0 {
		return nil
	}
	out := make([]string, len(mbs))
	for i, mb := range mbs {
		out[i] = mb.token
	}
	return out
}
