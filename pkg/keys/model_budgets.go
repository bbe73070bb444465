package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"lockstep/pkg/numbers"
	"lockstep/pkg/spend"
)

// ParseModelBudgets reads LiteLLM's model_max_budget (keys, internal users, budgets):
// {"<model group>": {"budget_limit" | "max_budget": USD (a number, or a numeric string as
// LiteLLM's CRUD endpoints pass it), "time_period" | "budget_duration": "30s", "1d", "1mo"}}
// (LiteLLM BudgetConfig and its aliases; validate_model_max_budget). A model without a
// budget_limit has no budget. nil or {}: nil. The per-model rpm/tpm limits of BudgetConfig are
// model_rpm_limit / model_tpm_limit here: a value other than null is an error naming it.
//
// Errors are LiteLLM's `Invalid model_max_budget: <reason>. Example of valid model_max_budget:
// https://docs.litellm.ai/docs/proxy/users`.
// invalidModelBudget starts LiteLLM's refusal text (capitalised as LiteLLM writes it).
const invalidModelBudget = "Invalid model_max_budget: "

func ParseModelBudgets(raw json.RawMessage) (map[string]spend.Budget, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
		return nil, nil
	}
	fail := func(format string, args ...any) error {
		return errors.New(invalidModelBudget + fmt.Sprintf(format, args...) + ". Example of valid model_max_budget: https://docs.litellm.ai/docs/proxy/users")
	}
	var byModel map[string]map[string]json.RawMessage
	if json.Unmarshal(raw, &byModel) != nil {
		return nil, fail(`want {"<model>": {"budget_limit": <USD>, "time_period": "1d"}}`)
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)
	out := make(map[string]spend.Budget, len(byModel))
	for _, m := range models {
		cfg := byModel[m]
		if m == "" {
			return nil, fail("a model name is empty")
		}
		var b spend.Budget
		for name, v := range cfg {
			if string(bytes.TrimSpace(v)) == "null" {
				continue
			}
			switch name {
			case "budget_limit", "max_budget":
				var f float64
				if json.Unmarshal(v, &f) != nil {
					var s string
					if json.Unmarshal(v, &s) != nil {
						return nil, fail("%s.%s must be a number (USD)", m, name)
					}
					var err error
					if f, err = strconv.ParseFloat(s, 64); err != nil {
						return nil, fail("%s.%s must be a number (USD)", m, name)
					}
				}
				if err := numbers.Check(name, f); err != nil {
					return nil, fail("%s.%v", m, err)
				}
				b.Max, b.Has = f, true
			case "time_period", "budget_duration":
				var s string
				if json.Unmarshal(v, &s) != nil {
					return nil, fail("%s.%s must be a duration like 30s, 1h, 1d or 1mo", m, name)
				}
				d, err := ParseDuration(s)
				if err != nil {
					return nil, fail("%s.%s: %v", m, name, err)
				}
				b.Every = d
			case "tpm_limit", "rpm_limit":
				return nil, fail("%s.%s is not supported yet (use model_%s)", m, name, name)
			default:
				return nil, fail("%s: unknown field %q (want budget_limit, time_period)", m, name)
			}
		}
		if b.Has {
			out[m] = b
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
