package admin

// Guardrail policy attachments (LiteLLM's /policies/attachments routes,
// litellm/proxy/policy_engine/policy_endpoints.py and attachment_registry.py): rows of
// gateway.policy_attachments (sql/021), a registry on the change feed like every other, that
// make a policy's guardrails run on every call (scope "*") or on the calls of some team
// aliases, key aliases, models and request tags (pkg/policy Attachment, pkg/call
// attachedPolicies). Admin objects: the proxy admin writes them, proxy_admin_viewer reads them
// (Rules' default). An attachment cannot be changed (LiteLLM has no update route): delete it
// and attach again.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"lockstep/pkg/store"
)

// AttachmentInput is a POST /policies/attachments body as decoded (LiteLLM
// PolicyAttachmentCreateRequest). Scope nil: not given.
type AttachmentInput struct {
	Policy                    string
	Scope                     *string
	Teams, Keys, Models, Tags []string
}

func attachmentNotFound(id string) error {
	return notFound("Attachment with ID %s not found", id)
}

// NewAttachment is POST /policies/attachments: inserts an attachment with a new uuid
// attachment_id. The policy is read FOR SHARE in the write's transaction, so a concurrent
// DeletePolicy either waits and sees the attachment (and refuses) or deletes first and this
// write sees the policy gone: an attachment of a missing policy can never commit.
//
// Errors: Invalid naming the field for a missing or blank policy_name; a scope other than "*"
// or null (LiteLLM reads only "*"; any other value would silently attach the policy by the
// other fields); neither scope "*" nor any of teams, keys, models, tags (LiteLLM attaches
// such a policy to every call, which lockstep asks to say with scope "*"); a list longer than
// MaxPolicyList or with a blank entry. NotFound `Policy '<n>' not found. Create the policy
// first.` (LiteLLM's 404). The store's.
func (a *Admin) NewAttachment(ctx context.Context, c Caller, in AttachmentInput) (store.Row, error) {
	if err := checkPolicyName("policy_name", in.Policy); err != nil {
		return store.Row{}, err
	}
	vals := store.Values{"attachment_id": uuid.NewString(), "policy_name": in.Policy,
		"created_by": budgetBy(c), "updated_by": budgetBy(c)}
	global := false
	if in.Scope != nil {
		if *in.Scope != "*" {
			return store.Row{}, invalid("scope", "scope must be \"*\" (every call) or null, got %q", *in.Scope)
		}
		global = true
		vals["scope"] = "*"
	}
	named := false
	for _, l := range []struct {
		col  string
		list []string
	}{{"teams", in.Teams}, {"keys", in.Keys}, {"models", in.Models}, {"tags", in.Tags}} {
		if err := checkPatterns(l.col, l.list); err != nil {
			return store.Row{}, err
		}
		named = named || len(l.list) > 0
		vals[l.col] = append([]string{}, l.list...)
	}
	if !global && !named {
		return store.Row{}, invalid("scope", "an attachment needs scope \"*\" (every call) or at least one of teams, keys, models, tags")
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		if _, err := w.tx.GetByNameForShare(ctx, store.Policy, in.Policy); errors.Is(err, store.ErrNotFound) {
			return notFound("Policy '%s' not found. Create the policy first.", in.Policy)
		} else if err != nil {
			return err
		}
		var err error
		row, err = w.Insert(ctx, store.PolicyAttachment, vals)
		return err
	})
	return row, err
}

// checkPatterns refuses a list of col (teams, keys, models, tags) longer than MaxPolicyList
// or holding a blank pattern or one with control characters: Invalid naming col.
func checkPatterns(col string, l []string) error {
	if len(l) > MaxPolicyList {
		return invalid(col, "%s lists at most %d patterns, got %d", col, MaxPolicyList, len(l))
	}
	if slices.ContainsFunc(l, func(p string) bool { return strings.TrimSpace(p) == "" }) {
		return invalid(col, "%s must not contain a blank pattern", col)
	}
	if slices.ContainsFunc(l, func(p string) bool { return strings.IndexFunc(p, unicode.IsControl) >= 0 }) {
		return invalid(col, "%s must not contain control characters", col)
	}
	return nil
}

// DeleteAttachment is DELETE /policies/attachments/{attachment_id}: the deleted row.
// NotFound `Attachment with ID <id> not found` (LiteLLM's text); the store's.
func (a *Admin) DeleteAttachment(ctx context.Context, id string) (store.Row, error) {
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		if row, err = w.GetForUpdate(ctx, store.PolicyAttachment, id); err != nil {
			return err
		}
		_, err = w.Delete(ctx, store.PolicyAttachment, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, attachmentNotFound(id)
	}
	return row, err
}

// Attachment reads one attachment by attachment_id. NotFound `Attachment with ID <id> not
// found`.
func (a *Admin) Attachment(ctx context.Context, id string) (store.Row, error) {
	row, err := a.st.Get(ctx, store.PolicyAttachment, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, attachmentNotFound(id)
	}
	return row, err
}

// Attachments reads every attachment, newest first (LiteLLM get_all_attachments_from_db
// orders by created_at descending).
func (a *Admin) Attachments(ctx context.Context) ([]store.Row, error) {
	rows, err := a.st.List(ctx, store.PolicyAttachment)
	slices.Reverse(rows)
	return rows, err
}
