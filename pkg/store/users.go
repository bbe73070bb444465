package store

import (
	"context"
	"fmt"
	"strings"
)

// UserFilter selects gateway.users rows for /user/list (LiteLLM get_users). Zero fields do not
// filter.
type UserFilter struct {
	Role string // user_role equals
	// UserIDs: one id matches user_ids containing it (case-insensitive), several match exactly
	// (LiteLLM's "user_ids" query parameter).
	UserIDs []string
	Email   string // user_email contains, case-insensitive
	Team    string // member of this team (members_with_roles of gateway.teams)
	// SortBy is a column of UserSortColumns ("" = created_at, newest first, as LiteLLM); Desc
	// orders it descending.
	SortBy string
	Desc   bool
}

// UserSortColumns are the columns /user/list may sort by (LiteLLM _validate_sort_params);
// "spend" is the user's total in gateway.key_spend.
var UserSortColumns = []string{"user_id", "user_email", "created_at", "spend", "user_alias", "user_role"}

// ListUsers reads one page (from 1, size rows) of the users f selects and their total count.
// Each row carries "key_count": the user's virtual keys. Errors: ErrUnavailable; an unknown
// SortBy is an error.
func (s *Store) ListUsers(ctx context.Context, f UserFilter, page, size int) ([]Row, int, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var where []string
	var args []any
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if f.Role != "" {
		where = append(where, "u.user_role = "+arg(f.Role))
	}
	switch len(f.UserIDs) {
	case 0:
	case 1:
		where = append(where, "strpos(lower(u.user_id), lower("+arg(f.UserIDs[0])+")) > 0")
	default:
		where = append(where, "u.user_id = ANY("+arg(f.UserIDs)+"::text[])")
	}
	if f.Email != "" {
		where = append(where, "strpos(lower(coalesce(u.user_email, '')), lower("+arg(f.Email)+")) > 0")
	}
	if f.Team != "" {
		where = append(where, `u.user_id IN (SELECT m->>'user_id' FROM gateway.teams t, jsonb_array_elements(t.members_with_roles) m
			WHERE t.team_id = `+arg(f.Team)+`)`)
	}
	cond := "true"
	if len(where) > 0 {
		cond = strings.Join(where, " AND ")
	}
	order := "u.created_at DESC, u.user_id"
	if f.SortBy != "" {
		col := ""
		for _, c := range UserSortColumns {
			if c == f.SortBy {
				col = "u." + c
			}
		}
		if col == "" {
			return nil, 0, fmt.Errorf("list users: sort column %q unknown", f.SortBy)
		}
		if f.SortBy == "spend" {
			col = "coalesce((SELECT s.spend FROM gateway.key_spend s WHERE s.token = 'user:' || u.user_id), 0)"
		}
		dir := "ASC"
		if f.Desc {
			dir = "DESC"
		}
		order = col + " " + dir + " NULLS LAST, u.user_id"
	}
	var total int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM gateway.users u WHERE "+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list users: %w", mapErr(err))
	}
	limit, offset := arg(size), arg((page-1)*size)
	rows, err := s.pool.Query(ctx, `SELECT u.user_id, u.version, (row_to_json(u)::jsonb || jsonb_build_object('key_count',
			(SELECT count(*) FROM gateway.api_keys k WHERE k.user_id = u.user_id)))::text
		FROM gateway.users u WHERE `+cond+` ORDER BY `+order+` LIMIT `+limit+` OFFSET `+offset, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list users: %w", mapErr(err))
	}
	out, err := scanRows(User, rows)
	return out, total, err
}
