package admin

// LiteLLM's unified access groups (LiteLLM_AccessGroupTable; management_endpoints/
// access_group_endpoints.py, routes /v1/access_group and /v1/unified_access_group):
// gateway.access_groups rows (sql/016), a registry on the change feed like every other. A
// group is a named set of model names, MCP server ids and agent ids; keys and teams attach it
// by id in their access_group_ids (kept in their litellm_fields), which is where the
// attachment lives: a group's assigned_key_ids / assigned_team_ids are read from the keys and
// teams that hold it, and writing them on the group writes those keys and teams in the same
// transaction (LiteLLM's _sync_add_access_group_to_keys / _teams and their removals). Groups
// are admin objects: the proxy admin writes them, proxy_admin_viewer reads them (LiteLLM
// _require_proxy_admin, _require_admin_view).
//
// This is not the older "access group" of access_groups.go (a model-group name in
// model_info.access_groups): that one has no row and no id.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"lockstep/pkg/store"
)

// AccessGroupWrite is one /v1/access_group create or update: the group's columns given (Vals:
// access_group_name, description, access_model_names, access_mcp_server_ids,
// access_agent_ids; lists as JSON text) and the attachments given (nil: not given, left as
// they are; LiteLLM's exclude_unset).
type AccessGroupWrite struct {
	Vals  store.Values
	Teams *[]string // assigned_team_ids: the teams that hold the group afterwards
	Keys  *[]string // assigned_key_ids: the keys (tokens, the sha256 hex) that hold it afterwards
}

// AccessGroupView is a group row with the keys and teams that hold it (each in id order).
type AccessGroupView struct {
	Row   store.Row
	Keys  []string
	Teams []string
}

func accessGroupNotFound(id string) error {
	return notFound("Access group '%s' not found", id)
}

// NewUnifiedGroup is POST /v1/access_group: inserts a group (a new uuid id, as LiteLLM) and
// attaches it to req.Teams and req.Keys. Errors: Conflict `Access group '<name>' already
// exists` (LiteLLM's 409), Invalid `Unknown team ids: a, b` (LiteLLM's text) or `Unknown key
// ids: ...` (LiteLLM skips a missing key; lockstep refuses it, nothing written), the store's.
func (a *Admin) NewUnifiedGroup(ctx context.Context, c Caller, req AccessGroupWrite) (AccessGroupView, error) {
	vals := req.Vals
	id := uuid.NewString()
	vals["access_group_id"] = id
	vals["created_by"], vals["updated_by"] = budgetBy(c), budgetBy(c)
	var out AccessGroupView
	err := a.Write(ctx, func(w *Writer) error {
		row, err := w.Insert(ctx, store.AccessGroup, vals)
		out, err = w.groupWritten(ctx, id, row, err, req)
		return err
	})
	return out, err
}

// UpdateUnifiedGroup is PUT /v1/access_group/{id}: the given columns change and, when given,
// the attachments become exactly req.Teams / req.Keys (the group is added to the new holders
// and removed from the dropped ones). Errors: NotFound `Access group '<id>' not found`,
// Conflict for a name another group has, NewUnifiedGroup's Invalid, the store's.
func (a *Admin) UpdateUnifiedGroup(ctx context.Context, c Caller, id string, req AccessGroupWrite) (AccessGroupView, error) {
	var out AccessGroupView
	err := a.Write(ctx, func(w *Writer) error {
		if _, err := w.GetForUpdate(ctx, store.AccessGroup, id); err != nil {
			return err
		}
		req.Vals["updated_by"] = budgetBy(c)
		row, err := w.Update(ctx, store.AccessGroup, id, req.Vals)
		out, err = w.groupWritten(ctx, id, row, err, req)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return AccessGroupView{}, accessGroupNotFound(id)
	}
	return out, err
}

// DeleteUnifiedGroup is DELETE /v1/access_group/{id}: the group leaves every key and team that
// holds it, then its row goes, in one transaction (LiteLLM delete_access_group). Errors:
// NotFound, the store's.
func (a *Admin) DeleteUnifiedGroup(ctx context.Context, id string) error {
	err := a.Write(ctx, func(w *Writer) error {
		if _, err := w.GetForUpdate(ctx, store.AccessGroup, id); err != nil {
			return err
		}
		none := []string{}
		if err := w.attachGroup(ctx, id, AccessGroupWrite{Teams: &none, Keys: &none}); err != nil {
			return err
		}
		_, err := w.Delete(ctx, store.AccessGroup, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return accessGroupNotFound(id)
	}
	return err
}

// UnifiedGroup reads one group with its holders. NotFound when unknown.
func (a *Admin) UnifiedGroup(ctx context.Context, id string) (AccessGroupView, error) {
	var out AccessGroupView
	err := a.st.Tx(ctx, func(tx Tx) error {
		row, err := tx.Get(ctx, store.AccessGroup, id)
		if err != nil {
			return err
		}
		out, err = (&Writer{tx: tx}).accessGroupView(ctx, row)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return AccessGroupView{}, accessGroupNotFound(id)
	}
	return out, err
}

// UnifiedGroups reads every group with its holders, newest first (LiteLLM orders by created_at
// desc).
func (a *Admin) UnifiedGroups(ctx context.Context) ([]AccessGroupView, error) {
	var out []AccessGroupView
	err := a.st.Tx(ctx, func(tx Tx) error {
		rows, err := tx.List(ctx, store.AccessGroup)
		if err != nil {
			return err
		}
		w := &Writer{tx: tx}
		for i := len(rows) - 1; i >= 0; i-- {
			v, err := w.accessGroupView(ctx, rows[i])
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// groupWritten finishes a group insert or update (row, err): a name in use is Conflict
// `Access group '<name>' already exists`; then req's attachments are written and the view read.
func (w *Writer) groupWritten(ctx context.Context, id string, row store.Row, err error, req AccessGroupWrite) (AccessGroupView, error) {
	if errors.Is(err, store.ErrConflict) {
		return AccessGroupView{}, conflict("Access group '%s' already exists", req.Vals["access_group_name"])
	}
	if err != nil {
		return AccessGroupView{}, err
	}
	if err := w.attachGroup(ctx, id, req); err != nil {
		return AccessGroupView{}, err
	}
	return w.accessGroupView(ctx, row)
}

func (w *Writer) accessGroupView(ctx context.Context, row store.Row) (AccessGroupView, error) {
	keys, teams, err := w.tx.AccessGroupHolders(ctx, row.ID)
	return AccessGroupView{Row: row, Keys: keys, Teams: teams}, err
}

// attachGroup makes group id held by exactly *req.Teams and *req.Keys (each when given): it
// is added to the access_group_ids of every listed team or key that lacks it and removed from
// every other one that has it. Every listed team and key must exist: Invalid `Unknown team
// ids: a, b` / `Unknown key ids: a, b`, and nothing is written.
func (w *Writer) attachGroup(ctx context.Context, id string, req AccessGroupWrite) error {
	if req.Teams == nil && req.Keys == nil {
		return nil
	}
	keys, teams, err := w.tx.AccessGroupHolders(ctx, id)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		typ   store.ObjectType
		field string
		want  *[]string
		have  []string
		what  string
	}{{store.Team, "assigned_team_ids", req.Teams, teams, "team"}, {store.Key, "assigned_key_ids", req.Keys, keys, "key"}} {
		if s.want == nil {
			continue
		}
		var missing []string
		for _, oid := range *s.want {
			if slices.Contains(s.have, oid) {
				continue
			}
			if err := w.holdGroup(ctx, s.typ, oid, id, true); errors.Is(err, store.ErrNotFound) {
				missing = append(missing, oid)
			} else if err != nil {
				return err
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return invalid(s.field, "Unknown %s ids: %s", s.what, strings.Join(missing, ", "))
		}
		for _, oid := range s.have {
			if !slices.Contains(*s.want, oid) {
				if err := w.holdGroup(ctx, s.typ, oid, id, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// holdGroup adds group (hold) to, or removes it from, the access_group_ids of the key or team
// oid (read FOR UPDATE). Errors: store.ErrNotFound when oid does not exist, the store's.
func (w *Writer) holdGroup(ctx context.Context, typ store.ObjectType, oid, group string, hold bool) error {
	row, err := w.GetForUpdate(ctx, typ, oid)
	if err != nil {
		return err
	}
	var r struct {
		LF struct {
			IDs []string `json:"access_group_ids"`
		} `json:"litellm_fields"`
	}
	if err := json.Unmarshal(row.Data, &r); err != nil {
		return err
	}
	ids := slices.DeleteFunc(r.LF.IDs, func(s string) bool { return s == group })
	if hold {
		ids = append(ids, group)
	}
	if ids == nil {
		ids = []string{}
	}
	b, _ := json.Marshal(map[string][]string{"access_group_ids": ids})
	_, err = w.Update(ctx, typ, oid, store.Values{"litellm_fields": store.JSONMerge(b)})
	return err
}

// lockLinkedAccessGroups: when vals of a key or team set access_group_ids (litellm_fields), each
// named group is read FOR SHARE, so a concurrent DeleteUnifiedGroup (FOR UPDATE, then the
// holders) either waits for this write and detaches it, or deletes first and this write sees
// the group gone. Errors: Invalid `access_group_ids: access group '<id>' not found`, the
// store's.
func (w *Writer) lockLinkedAccessGroups(ctx context.Context, typ store.ObjectType, vals store.Values) error {
	for _, id := range linkedList(typ, vals, "access_group_ids") {
		if _, err := w.tx.GetForShare(ctx, store.AccessGroup, id); errors.Is(err, store.ErrNotFound) {
			return invalid("access_group_ids", "access_group_ids: access group '%s' not found", id)
		} else if err != nil {
			return err
		}
	}
	return nil
}
