package admin

// Access groups (LiteLLM proxy "model access groups",
// litellm/proxy/management_endpoints/model_access_group_management_endpoints.py).
//
// A group has no table of its own: it is a name in model_info.access_groups of one or more
// gateway.models rows, and it exists exactly while some DB row carries it. Keys name groups in
// their models list; the LLM routes and /v1/models resolve them through the models registry.
//
// Writes read and rewrite the rows in one transaction that first locks gateway.models in
// SHARE ROW EXCLUSIVE mode (self-conflicting), so concurrent access-group writers on any replica
// run one after the other and none loses another's tags. A write is all-or-nothing; after commit
// the written rows are applied to the local registry (Write: version-guarded, read-your-writes)
// and reach the other replicas through the change feed. Nothing is reloaded, so a concurrent
// reload can neither fail the write nor stop a model serving.
//
// Config-file models are never written; groups are read from and judged on DB rows only, as
// LiteLLM does (get_all_access_groups_from_db).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

type AccessGroupRequest struct {
	AccessGroup string   `json:"access_group"`
	ModelNames  []string `json:"model_names"`
	ModelIDs    []string `json:"model_ids"`
}

// agOp is the kind of membership write.
type agOp int

const (
	agCreate  agOp = iota // the group must not exist yet (409)
	agReplace             // the group must exist (404); membership becomes exactly the selection
	agDelete              // the group must exist (404); no deployment keeps it
)

func (o agOp) String() string {
	switch o {
	case agCreate:
		return "create"
	case agReplace:
		return "update"
	}
	return "delete"
}

// agModel is one gateway.models row as the access-group writer sees it.
type agModel struct {
	row    store.Row
	id     string
	name   string
	info   map[string]json.RawMessage // model_info; nil when it is JSON null
	groups []string                   // model_info.access_groups
	bad    error                      // model_info is not an object, or access_groups not a list of strings
}

func parseModelRow(r store.Row) (agModel, error) {
	var m struct {
		ModelID   string          `json:"model_id"`
		ModelName string          `json:"model_name"`
		ModelInfo json.RawMessage `json:"model_info"`
	}
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return agModel{}, fmt.Errorf("decode model row %q: %w", r.ID, err)
	}
	out := agModel{row: r, id: m.ModelID, name: m.ModelName}
	if isNull(m.ModelInfo) {
		return out, nil
	}
	if err := json.Unmarshal(m.ModelInfo, &out.info); err != nil {
		out.bad = fmt.Errorf("model_info is not a JSON object")
		return out, nil
	}
	if raw, ok := out.info["access_groups"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &out.groups); err != nil {
			out.bad = fmt.Errorf("model_info.access_groups is not a list of strings")
		}
	}
	return out, nil
}

func parseModelRows(rows []store.Row) ([]agModel, error) {
	out := make([]agModel, 0, len(rows))
	for _, r := range rows {
		m, err := parseModelRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// carries reports whether the row is (as far as it can be read) tagged with group.
func (m agModel) carries(group string) bool { return m.bad == nil && slices.Contains(m.groups, group) }

// agSelection is what a new/update request puts in the group: model group names (every DB
// deployment of each) or exactly the listed model ids. LiteLLM: model_ids win when both are given.
type agSelection struct {
	names []string
	ids   []string
}

func selectionOf(req AccessGroupRequest) (agSelection, error) {
	dedupe := func(in []string, what string) ([]string, error) {
		var out []string
		for _, v := range in {
			if strings.TrimSpace(v) == "" {
				return nil, invalidf("%s must not contain empty values", what)
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		return out, nil
	}
	if len(req.ModelIDs) > 0 {
		ids, err := dedupe(req.ModelIDs, "model_ids")
		return agSelection{ids: ids}, err
	}
	if len(req.ModelNames) > 0 {
		names, err := dedupe(req.ModelNames, "model_names")
		return agSelection{names: names}, err
	}
	return agSelection{}, invalidf("Either model_names or model_ids must be provided and non-empty")
}

// readThrough loads the selected models this replica does not hold yet (bounded read-through,
// as an LLM request naming them would), so a model another tool wrote a moment ago is found
// and the writer's registry serves it. The transaction's own read of the table is the final
// word on what exists: a read-through refused by its budget cannot fail the write.
func (a *Admin) readThrough(ctx context.Context, sel agSelection) {
	models := a.router.Models()
	for _, n := range sel.names {
		if len(models.Load().ByName(n)) == 0 {
			_, _ = a.router.Group(ctx, n)
		}
	}
	for _, id := range sel.ids {
		if _, ok := models.Load().ByID(id); !ok {
			_ = models.Resolve(ctx, id)
		}
	}
}

// targets returns the ids of the DB rows the selection puts in the group, or the 400 that
// refuses it: unknown names/ids first ("Model(s) not found: a, b"), then models that exist only
// in the config file (LiteLLM's messages).
func (a *Admin) targets(sel agSelection, models []agModel) (map[string]bool, error) {
	snap := a.router.Models().Load()
	out := map[string]bool{}
	var notFound []string
	var notInDB error
	for _, n := range sel.names {
		found := false
		for _, m := range models {
			if m.name == n {
				out[m.id], found = true, true
			}
		}
		if found {
			continue
		}
		if len(snap.ByName(n)) == 0 {
			notFound = append(notFound, n)
		} else if notInDB == nil {
			notInDB = invalidf("Can't find model '%s' in Database. Access group management is only supported for database models.", n)
		}
	}
	for _, id := range sel.ids {
		i := slices.IndexFunc(models, func(m agModel) bool { return m.id == id })
		if i >= 0 {
			out[id] = true
			continue
		}
		if e, ok := snap.ByID(id); ok && e.Config {
			if notInDB == nil {
				notInDB = invalidf("Deployment with model_id '%s' is defined in the config file. Access group management is only supported for database models.", id)
			}
			continue
		}
		notFound = append(notFound, id)
	}
	if len(notFound) > 0 {
		return nil, invalidf("Model(s) not found: %s", strings.Join(notFound, ", "))
	}
	if notInDB != nil {
		return nil, notInDB
	}
	return out, nil
}

func withGroup(groups []string, group string, want bool) []string {
	out := make([]string, 0, len(groups)+1)
	for _, g := range groups {
		if g != group {
			out = append(out, g)
		}
	}
	if want {
		out = append(out, group)
	}
	return out
}

// AccessGroupResult is the outcome of a committed membership write.
type AccessGroupResult struct {
	Names   []string // model group names of the deployments now in the group, sorted
	IDs     []string // their model ids, sorted
	Updated int      // rows written
}

// writeAccessGroup runs one membership write (see the file comment) and applies the written
// rows locally after commit.
func (a *Admin) writeAccessGroup(ctx context.Context, op agOp, group string, sel agSelection) (AccessGroupResult, error) {
	if op != agDelete {
		a.readThrough(ctx, sel)
	}
	var res AccessGroupResult
	err := a.Write(ctx, func(w *Writer) error {
		res = AccessGroupResult{} // a retried transaction starts afresh
		if err := w.LockTable(ctx, store.Model); err != nil {
			return err
		}
		rows, err := w.List(ctx, store.Model)
		if err != nil {
			return err
		}
		models, err := parseModelRows(rows)
		if err != nil {
			return err
		}
		exists := slices.ContainsFunc(models, func(m agModel) bool { return m.carries(group) })
		if op != agCreate && !exists {
			return groupNotFound(group)
		}
		want := map[string]bool{}
		if op != agDelete {
			if want, err = a.targets(sel, models); err != nil {
				return err
			}
		}
		if op == agCreate && exists {
			return conflict("Access group '%s' already exists. Use PUT /access_group/%s/update to modify it.", group, group)
		}
		names := map[string]bool{}
		for _, m := range models {
			if want[m.id] {
				names[m.name] = true
				res.IDs = append(res.IDs, m.id)
			}
			if want[m.id] == m.carries(group) {
				continue
			}
			if m.bad != nil {
				return invalidf("Can't change the access groups of model %s: %v; fix the row first", m.id, m.bad)
			}
			info := copyInfo(m.info)
			gj, _ := json.Marshal(withGroup(m.groups, group, want[m.id]))
			info["access_groups"] = gj
			ij, err := json.Marshal(info)
			if err != nil {
				return err
			}
			nr, err := w.Update(ctx, store.Model, m.id, store.Values{"model_info": ij})
			if err != nil {
				return err
			}
			// An invalid new version never replaces a serving one: refuse a tag that would
			// make a buildable deployment unbuildable (nothing is written).
			if _, oldErr := (router.Builder{Deployments: a.build}).BuildRow(m.row); oldErr == nil {
				if _, newErr := (router.Builder{Deployments: a.build}).BuildRow(nr); newErr != nil {
					return invalidf("Can't change the access groups of model %s: the result is not a valid model: %v", m.id, newErr)
				}
			}
			res.Updated++
		}
		for n := range names {
			res.Names = append(res.Names, n)
		}
		sort.Strings(res.Names)
		sort.Strings(res.IDs)
		return nil
	})
	if err != nil {
		return AccessGroupResult{}, err
	}
	zerolog.Ctx(ctx).Info().Str("access_group", group).Str("op", op.String()).Int("models_updated", res.Updated).Msg("access group written")
	return res, nil
}

// copyInfo copies a model_info object (nil for JSON null).
func copyInfo(m map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func groupNotFound(group string) error {
	return notFound("Access group '%s' not found", group)
}

// AccessGroupInfo is one group as /access_group/list and /info show it.
type AccessGroupInfo struct {
	AccessGroup     string   `json:"access_group"`
	ModelNames      []string `json:"model_names"` // model group names, sorted
	ModelIDs        []string `json:"model_ids"`   // deployments, sorted
	DeploymentCount int      `json:"deployment_count"`
}

// AccessGroups reads every group from gateway.models (the source of truth, the same answer on
// every replica).
func (a *Admin) AccessGroups(ctx context.Context) (map[string]*AccessGroupInfo, error) {
	rows, err := a.st.List(ctx, store.Model)
	if err != nil {
		return nil, err
	}
	models, err := parseModelRows(rows)
	if err != nil {
		return nil, err
	}
	out := map[string]*AccessGroupInfo{}
	for _, m := range models {
		if m.bad != nil {
			continue
		}
		for _, g := range m.groups {
			gi := out[g]
			if gi == nil {
				gi = &AccessGroupInfo{AccessGroup: g, ModelNames: []string{}, ModelIDs: []string{}}
				out[g] = gi
			}
			if slices.Contains(gi.ModelIDs, m.id) {
				continue // listed twice in one row
			}
			gi.ModelIDs = append(gi.ModelIDs, m.id)
			if !slices.Contains(gi.ModelNames, m.name) {
				gi.ModelNames = append(gi.ModelNames, m.name)
			}
		}
	}
	for _, gi := range out {
		sort.Strings(gi.ModelNames)
		sort.Strings(gi.ModelIDs)
		gi.DeploymentCount = len(gi.ModelIDs)
	}
	return out, nil
}

func invalidf(format string, args ...any) error { return invalid("", format, args...) }

// CreateAccessGroup is /access_group/new: tags the selected DB deployments with
// req.AccessGroup. Errors: Invalid (empty name or selection, unknown models "Model(s) not
// found: a, b" after a read-through, config-only models), Conflict when the group exists.
func (a *Admin) CreateAccessGroup(ctx context.Context, req AccessGroupRequest) (AccessGroupResult, error) {
	if strings.TrimSpace(req.AccessGroup) == "" {
		return AccessGroupResult{}, invalid("access_group", "access_group is required and cannot be empty")
	}
	sel, err := selectionOf(req)
	if err != nil {
		return AccessGroupResult{}, err
	}
	return a.writeAccessGroup(ctx, agCreate, req.AccessGroup, sel)
}

// ReplaceAccessGroup is PUT /access_group/{g}/update: the group's membership becomes exactly
// the selection. Errors as CreateAccessGroup, and NotFound when the group does not exist.
func (a *Admin) ReplaceAccessGroup(ctx context.Context, group string, req AccessGroupRequest) (AccessGroupResult, error) {
	sel, err := selectionOf(req)
	if err != nil {
		return AccessGroupResult{}, err
	}
	return a.writeAccessGroup(ctx, agReplace, group, sel)
}

// DeleteAccessGroup is DELETE /access_group/{g}/delete: untags every DB deployment. NotFound
// when the group does not exist.
func (a *Admin) DeleteAccessGroup(ctx context.Context, group string) (AccessGroupResult, error) {
	return a.writeAccessGroup(ctx, agDelete, group, agSelection{})
}

// AccessGroup is one group as AccessGroups reads it; NotFound "Access group '<g>' not found"
// when no DB deployment carries it.
func (a *Admin) AccessGroup(ctx context.Context, group string) (*AccessGroupInfo, error) {
	groups, err := a.AccessGroups(ctx)
	if err != nil {
		return nil, err
	}
	gi, ok := groups[group]
	if !ok {
		return nil, groupNotFound(group)
	}
	return gi, nil
}
