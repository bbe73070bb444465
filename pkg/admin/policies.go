package admin

// Guardrail policies as objects (LiteLLM's /policies routes, litellm/proxy/policy_engine/
// policy_endpoints.py and policy_registry.py, read at BerriAI/litellm commit
// 151c76a35f3314acfe7d395fb88b4f5a09efb5fc): gateway.policies rows (sql/017), a registry on
// the change feed like every other. Keys and teams attach policies by name in their
// litellm_fields "policies" (LiteLLM keeps them in the key's and team's metadata); the call
// pipeline runs the guardrails they resolve to (pkg/call callerGuardrails, pkg/policy). The
// validation LiteLLM's PolicyValidator does for config policies (guardrails exist, the parent
// exists, no circular inheritance) holds here for every write, so an accepted policy always
// resolves. Policies are admin objects: the proxy admin writes them, proxy_admin_viewer reads
// them (Rules).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"lockstep/pkg/policy"
	"lockstep/pkg/store"
)

// PolicyInput is a /policies write as decoded (LiteLLM PolicyCreateRequest /
// PolicyUpdateRequest): a nil field is not given (an update keeps its value, as LiteLLM's
// "is not None" updates).
type PolicyInput struct {
	Name        *string
	Inherit     *string
	Description *string
	Add, Remove *[]string
	// Condition is the condition object as sent ({"model": ...}); nil: not given.
	Condition json.RawMessage
}

// MaxPolicyList bounds guardrails_add, guardrails_remove and a key's or team's policies (each
// name is looked up in the write's transaction). Source: none in LiteLLM (unbounded there);
// the project's "bounded loops".
const MaxPolicyList = 100

func policyNotFound(id string) error { return notFound("Policy with ID %s not found", id) }

// NewPolicy is POST /policies: inserts a policy with a new uuid policy_id. Errors: Invalid
// naming the field for a missing or blank policy_name, a guardrail of guardrails_add that
// does not exist (`Guardrail '<g>' not found in guardrail registry`, LiteLLM's
// PolicyValidator text), an unknown parent (`Parent policy '<p>' not found`), a bad
// condition; Invalid `Policy with name '<n>' already exists` (LiteLLM's text); the store's.
func (a *Admin) NewPolicy(ctx context.Context, c Caller, in PolicyInput) (store.Row, error) {
	if in.Name == nil {
		return store.Row{}, invalid("policy_name", "policy_name is required")
	}
	vals, err := policyValues(in)
	if err != nil {
		return store.Row{}, err
	}
	vals["policy_id"] = uuid.NewString()
	vals["created_by"], vals["updated_by"] = budgetBy(c), budgetBy(c)
	var row store.Row
	err = a.Write(ctx, func(w *Writer) error {
		if err := a.checkPolicy(ctx, w, *in.Name, in); err != nil {
			return err
		}
		var err error
		row, err = w.Insert(ctx, store.Policy, vals)
		if errors.Is(err, store.ErrConflict) {
			return invalid("policy_name", "Policy with name '%s' already exists", *in.Name)
		}
		return err
	})
	return row, err
}

// UpdatePolicy is PUT /policies/{policy_id}: the given fields change. Renaming a policy that
// keys, teams or other policies use by name is refused (they would lose it): Invalid naming
// them. Errors: NewPolicy's, NotFound `Policy with ID <id> not found`.
func (a *Admin) UpdatePolicy(ctx context.Context, c Caller, id string, in PolicyInput) (store.Row, error) {
	vals, err := policyValues(in)
	if err != nil {
		return store.Row{}, err
	}
	vals["updated_by"] = budgetBy(c)
	var row store.Row
	err = a.Write(ctx, func(w *Writer) error {
		cur, err := w.GetForUpdate(ctx, store.Policy, id)
		if err != nil {
			return err
		}
		old, err := policy.BuildRow(cur)
		if err != nil {
			return err
		}
		name := old.Name
		if in.Name != nil && *in.Name != old.Name {
			links, err := w.tx.PolicyLinks(ctx, old.Name)
			if err != nil {
				return err
			}
			if len(links) > 0 {
				return invalid("policy_name", "Policy %s is still used by %s: it cannot be renamed", old.Name, strings.Join(links, ", "))
			}
			name = *in.Name
		}
		if in.Inherit == nil && old.Inherit != "" { // the parent kept: re-check the chain under the new name
			p := old.Inherit
			in.Inherit = &p
		}
		if err := a.checkPolicy(ctx, w, name, in); err != nil {
			return err
		}
		row, err = w.Update(ctx, store.Policy, id, vals)
		if errors.Is(err, store.ErrConflict) {
			return invalid("policy_name", "Policy with name '%s' already exists", name)
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, policyNotFound(id)
	}
	return row, err
}

// DeletePolicy is DELETE /policies/{policy_id}: the deleted row. A policy still attached to a
// key or team, or inherited by another policy, is not deleted (their calls would lose its
// guardrails): Invalid `Policy <name> is still used by <kind> <id>[, ...]: detach it first`.
// Errors: NotFound, the store's.
func (a *Admin) DeletePolicy(ctx context.Context, id string) (store.Row, error) {
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		if row, err = w.GetForUpdate(ctx, store.Policy, id); err != nil {
			return err
		}
		p, err := policy.BuildRow(row)
		if err != nil {
			return err
		}
		links, err := w.tx.PolicyLinks(ctx, p.Name)
		if err != nil {
			return err
		}
		if len(links) > 0 {
			return invalid("policy_id", "Policy %s is still used by %s: detach it first (policies: [])", p.Name, strings.Join(links, ", "))
		}
		_, err = w.Delete(ctx, store.Policy, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, policyNotFound(id)
	}
	return row, err
}

// Policy reads one policy by policy_id. NotFound `Policy with ID <id> not found`.
func (a *Admin) Policy(ctx context.Context, id string) (store.Row, error) {
	row, err := a.st.Get(ctx, store.Policy, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, policyNotFound(id)
	}
	return row, err
}

// Policies reads every policy, oldest first (/policies/list).
func (a *Admin) Policies(ctx context.Context) ([]store.Row, error) {
	return a.st.List(ctx, store.Policy)
}

// ResolvedGuardrails is GET /policies/{policy_id}/resolved-guardrails: the policy's name and
// the guardrails its inheritance chain resolves to, conditions aside (LiteLLM
// resolve_guardrails_from_db, which passes no request context). Errors: NotFound, Invalid for
// a broken chain (a missing parent or a cycle written around the checks).
func (a *Admin) ResolvedGuardrails(ctx context.Context, id string) (string, []string, error) {
	row, err := a.Policy(ctx, id)
	if err != nil {
		return "", nil, err
	}
	p, err := policy.BuildRow(row)
	if err != nil {
		return "", nil, err
	}
	byName := map[string]*policy.Policy{}
	rows, err := a.st.List(ctx, store.Policy)
	if err != nil {
		return "", nil, err
	}
	for _, r := range rows {
		if q, err := policy.BuildRow(r); err == nil {
			byName[q.Name] = q
		}
	}
	chain, err := policy.Chain(p.Name, func(n string) (*policy.Policy, error) {
		if q, ok := byName[n]; ok {
			return q, nil
		}
		return nil, invalid("inherit", "Parent policy '%s' not found", n)
	})
	if err != nil {
		return "", nil, invalid("inherit", "%v", err)
	}
	out := policy.Resolved(chain, nil)
	return p.Name, out, nil
}

// policyValues are the column values of in (policy_name checked, condition parsed and kept as
// sent). Errors: Invalid naming the field.
func policyValues(in PolicyInput) (store.Values, error) {
	vals := store.Values{}
	if in.Name != nil {
		if err := checkPolicyName("policy_name", *in.Name); err != nil {
			return nil, err
		}
		vals["policy_name"] = *in.Name
	}
	if in.Inherit != nil {
		if *in.Inherit != "" {
			if err := checkPolicyName("inherit", *in.Inherit); err != nil {
				return nil, err
			}
			vals["inherit"] = *in.Inherit
		} else {
			vals["inherit"] = nil
		}
	}
	if in.Description != nil {
		vals["description"] = *in.Description
	}
	for col, l := range map[string]*[]string{"guardrails_add": in.Add, "guardrails_remove": in.Remove} {
		if l == nil {
			continue
		}
		if len(*l) > MaxPolicyList {
			return nil, invalid(col, "%s lists at most %d guardrails, got %d", col, MaxPolicyList, len(*l))
		}
		for _, g := range *l {
			if strings.TrimSpace(g) == "" {
				return nil, invalid(col, "%s must not contain a blank guardrail name", col)
			}
		}
		vals[col] = append([]string{}, *l...)
	}
	if in.Condition != nil {
		if _, err := policy.ParseCondition(in.Condition); err != nil {
			return nil, invalid("condition", "%v", err)
		}
		vals["condition"] = []byte(in.Condition)
	}
	return vals, nil
}

// checkPolicyName refuses a blank name or one with control characters (what names the field).
func checkPolicyName(what, n string) error {
	if strings.TrimSpace(n) == "" {
		return invalid(what, "%s must be a non-blank string", what)
	}
	if strings.IndexFunc(n, unicode.IsControl) >= 0 {
		return invalid(what, "%s must not contain control characters", what)
	}
	return nil
}

// checkPolicy checks, inside write w, what a policy named name with in's fields refers to:
// every guardrail of guardrails_add exists (config file or an active database row), and its
// parent (inherit) exists — read FOR SHARE, so it cannot be deleted before this commits — and
// does not lead back to name (LiteLLM PolicyValidator, max depth policy.MaxDepth).
func (a *Admin) checkPolicy(ctx context.Context, w *Writer, name string, in PolicyInput) error {
	if in.Add != nil {
		for _, g := range *in.Add {
			ok, err := a.guardrailExists(ctx, w, g)
			if err != nil {
				return err
			}
			if !ok {
				return invalid("guardrails_add", "Guardrail '%s' not found in guardrail registry", g)
			}
		}
	}
	if in.Inherit == nil || *in.Inherit == "" {
		return nil
	}
	parent := *in.Inherit
	if _, err := w.tx.GetByNameForShare(ctx, store.Policy, parent); errors.Is(err, store.ErrNotFound) {
		return invalid("inherit", "Parent policy '%s' not found", parent)
	} else if err != nil {
		return err
	}
	seen := []string{name}
	for n, depth := parent, 0; n != ""; depth++ {
		if slices.Contains(seen, n) {
			return invalid("inherit", "Circular inheritance detected: %s -> %s", strings.Join(seen, " -> "), n)
		}
		if depth == policy.MaxDepth {
			return invalid("inherit", "Inheritance chain too deep (exceeded max depth of %d)", policy.MaxDepth)
		}
		seen = append(seen, n)
		rows, err := w.ListBy(ctx, store.Policy, "policy_name", n)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return invalid("inherit", "Parent policy '%s' not found", n)
		}
		p, err := policy.BuildRow(rows[0])
		if err != nil {
			return err
		}
		n = p.Inherit
	}
	return nil
}

// guardrailExists reports whether a guardrail named name runs on this gateway: a config-file
// or loaded one, else an active gateway.guardrails row.
func (a *Admin) guardrailExists(ctx context.Context, w *Writer, name string) (bool, error) {
	if a.guardrails != nil && len(a.guardrails.Load().ByName(name)) > 0 {
		return true, nil
	}
	if !a.Stored(store.Guardrail) {
		return false, nil
	}
	rows, err := w.ListBy(ctx, store.Guardrail, "guardrail_name", name)
	if err != nil {
		return false, err
	}
	for _, r := range rows {
		var g struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(r.Data, &g) == nil && (g.Status == "" || g.Status == "active") {
			return true, nil
		}
	}
	return false, nil
}

// lockLinkedPolicies runs before every insert or update of a key or team with vals: each
// policy its litellm_fields.policies names is read FOR SHARE in the write's own transaction,
// so a concurrent DeletePolicy (FOR UPDATE, then PolicyLinks) either waits for this write and
// sees the link, or deletes first and this write sees the policy gone: an attachment of a
// missing policy can never commit. Errors: Invalid `Policy '<name>' not found. Create it
// first with POST /policies`, the store's.
func (w *Writer) lockLinkedPolicies(ctx context.Context, typ store.ObjectType, vals store.Values) error {
	names := linkedList(typ, vals, "policies")
	if len(names) > MaxPolicyList {
		return invalid("policies", "policies lists at most %d policies, got %d", MaxPolicyList, len(names))
	}
	for _, n := range names {
		if _, err := w.tx.GetByNameForShare(ctx, store.Policy, n); errors.Is(err, store.ErrNotFound) {
			return invalid("policies", "Policy '%s' not found. Create it first with POST /policies", n)
		} else if err != nil {
			return fmt.Errorf("policy %q: %w", n, err)
		}
	}
	return nil
}

// linkedList is the list a write of a key or team sets in litellm_fields member (its policies,
// its access_group_ids; nil for other types, when not set, or when litellm_fields is not an
// object, which the store refuses).
func linkedList(typ store.ObjectType, vals store.Values, member string) []string {
	if typ != store.Key && typ != store.Team {
		return nil
	}
	raw := litellmFieldsRaw(vals)
	if raw == nil {
		return nil
	}
	var lf map[string]json.RawMessage
	var l []string
	if json.Unmarshal(raw, &lf) != nil || json.Unmarshal(lf[member], &l) != nil {
		return nil
	}
	return l
}

// litellmFieldsRaw is the litellm_fields value of a write as JSON text (nil when vals set
// none).
func litellmFieldsRaw(vals store.Values) []byte {
	switch v := vals["litellm_fields"].(type) {
	case store.JSONMerge:
		return v
	case []byte:
		return v
	case json.RawMessage:
		return v
	case string:
		return []byte(v)
	}
	return nil
}
