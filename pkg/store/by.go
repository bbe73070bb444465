package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"lockstep/pkg/telemetry"
)

// ListBy reads every row of typ whose column equals value, ordered by created_at (e.g. the keys
// of a team: ListBy(ctx, Key, "team_id", id)). column is a column name, quoted as an identifier.
func (s *Store) ListBy(ctx context.Context, typ ObjectType, column, value string) ([]Row, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return listBy(ctx, s.pool, typ, column, value)
}

func listBy(ctx context.Context, q querier, typ ObjectType, column, value string) ([]Row, error) {
	ti, err := info(typ)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t WHERE t.%s = $1 ORDER BY t.created_at, t.%s",
		ti.PK, ti.Table, pgx.Identifier{column}.Sanitize(), ti.PK), value)
	if err != nil {
		return nil, fmt.Errorf("list %ss by %s: %w", typ, column, mapErr(err))
	}
	return scanRows(typ, rows)
}

// ListBy is Store.ListBy inside the transaction.
func (t *TxStore) ListBy(ctx context.Context, typ ObjectType, column, value string) ([]Row, error) {
	return listBy(ctx, t.tx, typ, column, value)
}

// Insert is Store.Insert inside the transaction.
func (t *TxStore) Insert(ctx context.Context, typ ObjectType, vals Values) (Row, error) {
	return insert(ctx, t.tx, typ, vals)
}

// GetForUpdate reads one row by primary key and locks it until the transaction ends (a
// read-modify-write such as adding a team member). Errors: ErrNotFound, ErrUnavailable.
func (t *TxStore) GetForUpdate(ctx context.Context, typ ObjectType, id string) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	sql := fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t WHERE t.%s = $1 FOR UPDATE", ti.PK, ti.Table, ti.PK)
	return queryRow(ctx, t.tx, typ, "get", sql, []any{id})
}

// GetForShare reads one row by primary key and takes a FOR SHARE lock on it until the
// transaction ends: the row cannot be updated or deleted meanwhile, while other readers and
// sharers go on (linking an object to a budget while /budget/delete runs; Postgres docs
// "Row-Level Locks"). Errors: ErrNotFound, ErrUnavailable.
func (t *TxStore) GetForShare(ctx context.Context, typ ObjectType, id string) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	sql := fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t WHERE t.%s = $1 FOR SHARE", ti.PK, ti.Table, ti.PK)
	return queryRow(ctx, t.tx, typ, "get", sql, []any{id})
}

// Delete is Store.Delete inside the transaction: the tombstone version of the deleted row.
// Errors: ErrNotFound, ErrUnavailable.
func (t *TxStore) Delete(ctx context.Context, typ ObjectType, id string) (int64, error) {
	ti, err := info(typ)
	if err != nil {
		return 0, err
	}
	var v int64
	err = t.tx.QueryRow(ctx, fmt.Sprintf("DELETE FROM %s t WHERE t.%s = $1 RETURNING t.version + 1", ti.Table, ti.PK), id).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("delete %s %q: %w", typ, id, mapErr(err))
	}
	telemetry.RecordChange(ctx, string(typ), "delete", id, v)
	return v, nil
}

// DeleteBy deletes every row of typ whose column equals value and returns the deleted ids with
// their tombstone versions (e.g. a team's keys when the team is deleted).
func (t *TxStore) DeleteBy(ctx context.Context, typ ObjectType, column, value string) (map[string]int64, error) {
	ti, err := info(typ)
	if err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(ctx, fmt.Sprintf("DELETE FROM %s t WHERE t.%s = $1 RETURNING t.%s, t.version + 1",
		ti.Table, pgx.Identifier{column}.Sanitize(), ti.PK), value)
	if err != nil {
		return nil, fmt.Errorf("delete %ss by %s: %w", typ, column, mapErr(err))
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return nil, mapErr(err)
		}
		out[id] = v
		telemetry.RecordChange(ctx, string(typ), "delete", id, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("delete %ss by %s: %w", typ, column, mapErr(err))
	}
	return out, nil
}

// BudgetLink is one object or membership linked to a budget (sql/012).
type BudgetLink struct {
	// Kind is "end_user", "key", "organization" (their litellm_fields.budget_id), "project"
	// (its budget_id column, sql/020), "team" (its
	// member budget, litellm_fields.team_member_budget_id), "team_membership" (a member's
	// budget in the team, teams.team_member_budgets) or "organization_membership" (a member's
	// max_budget_in_organization, organizations.members[].budget_id).
	Kind string
	// ID is the object's id (a membership's team or organization); UserID a membership's user.
	ID, UserID string
}

// Membership reports whether l is a team or organization membership.
func (l BudgetLink) Membership() bool {
	return l.Kind == "team_membership" || l.Kind == "organization_membership"
}

// String names the link in messages: "<kind> <id>", a membership "<kind> <id>/<user>".
func (l BudgetLink) String() string {
	if l.Membership() {
		return l.Kind + " " + l.ID + "/" + l.UserID
	}
	return l.Kind + " " + l.ID
}

// BudgetLinks lists what links budget id: up to 5 objects (end users, keys and organizations
// whose litellm_fields.budget_id is id, teams whose member budget it is, projects whose
// budget_id it is, sql/020) and every team and
// organization membership whose budget it is. A scan of those tables (no index: deleting or
// changing a membership budget is rare).
func (t *TxStore) BudgetLinks(ctx context.Context, id string) ([]BudgetLink, error) {
	rows, err := t.links(ctx, "budget", id, `SELECT json_build_array(kind, oid, uid)::text FROM (
		(SELECT kind, oid, '' AS uid FROM (
			SELECT 'end_user' AS kind, user_id AS oid FROM gateway.end_users WHERE litellm_fields->>'budget_id' = $1
			UNION ALL SELECT 'key', token FROM gateway.api_keys WHERE litellm_fields->>'budget_id' = $1
			UNION ALL SELECT 'organization', organization_id FROM gateway.organizations WHERE litellm_fields->>'budget_id' = $1
			UNION ALL SELECT 'team', team_id FROM gateway.teams WHERE litellm_fields->>'team_member_budget_id' = $1
			UNION ALL SELECT 'project', project_id FROM gateway.projects WHERE budget_id = $1
		) o LIMIT 5)
		UNION ALL SELECT 'team_membership', t.team_id, e.key FROM gateway.teams t,
			jsonb_each(CASE WHEN jsonb_typeof(t.team_member_budgets) = 'object' THEN t.team_member_budgets ELSE '{}'::jsonb END) e
			WHERE e.value->>'budget_id' = $1
		UNION ALL SELECT 'organization_membership', o.organization_id, coalesce(m->>'user_id', '') FROM gateway.organizations o,
			jsonb_array_elements(CASE WHEN jsonb_typeof(o.members) = 'array' THEN o.members ELSE '[]'::jsonb END) m
			WHERE m->>'budget_id' = $1) l`)
	if err != nil {
		return nil, err
	}
	out := make([]BudgetLink, 0, len(rows))
	for _, r := range rows {
		var l [3]string
		if err := json.Unmarshal([]byte(r), &l); err != nil {
			return nil, fmt.Errorf("budget %q links: %w", id, err)
		}
		out = append(out, BudgetLink{Kind: l[0], ID: l[1], UserID: l[2]})
	}
	return out, nil
}

// links runs query (one text column, $1 = id) and returns its rows: the "<kind> <id>" names
// of the objects linked to the what named id (BudgetLinks, PolicyLinks).
func (t *TxStore) links(ctx context.Context, what, id, query string) ([]string, error) {
	rows, err := t.tx.Query(ctx, query, id)
	if err != nil {
		return nil, fmt.Errorf("%s %q links: %w", what, id, mapErr(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("%s %q links: %w", what, id, mapErr(err))
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s %q links: %w", what, id, mapErr(err))
	}
	return out, nil
}

// AccessGroupHolders lists the keys (tokens) and teams (ids) whose litellm_fields
// access_group_ids hold access group id (sql/016), each in id order: the group's
// assigned_key_ids and assigned_team_ids. A scan of both tables (no index: the management
// answers of a group are rare next to calls, which read the registries).
func (t *TxStore) AccessGroupHolders(ctx context.Context, id string) (keys, teams []string, err error) {
	rows, err := t.tx.Query(ctx, `SELECT 'key', token FROM gateway.api_keys WHERE litellm_fields->'access_group_ids' ? $1
		UNION ALL SELECT 'team', team_id FROM gateway.teams WHERE litellm_fields->'access_group_ids' ? $1
		ORDER BY 1, 2`, id)
	if err != nil {
		return nil, nil, fmt.Errorf("access group %q holders: %w", id, mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var kind, oid string
		if err := rows.Scan(&kind, &oid); err != nil {
			return nil, nil, fmt.Errorf("access group %q holders: %w", id, mapErr(err))
		}
		if kind == "key" {
			keys = append(keys, oid)
		} else {
			teams = append(teams, oid)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("access group %q holders: %w", id, mapErr(err))
	}
	return keys, teams, nil
}
