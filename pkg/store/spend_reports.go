package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// SpendLogFilter selects spend logs (LiteLLM /spend/logs query parameters). Empty fields do
// not filter.
type SpendLogFilter struct {
	Token string // api_key: the key's token
	// RequestID matches the log's request_id as answered: the response id the client saw, or
	// the call id (x-litellm-call-id) of a log without one.
	RequestID  string
	UserID     string    // the key's internal user (LiteLLM SpendLogs "user")
	Start, End time.Time // [Start, End) on start_time; zero: unbounded
	Limit      int       // at most this many rows (default 10000)
}

const spendLogColumns = `request_id, api_key, call_type, model, model_id, spend, prompt_tokens, completion_tokens,
	total_tokens, start_time, end_time, replica_id, user_id, team_id, organization_id, end_user, status, response_id, key_alias, team_alias, request_tags::text, project_id`

// SpendLogsWhere reads the spend logs f selects, newest first. Errors: ErrUnavailable.
func (s *Store) SpendLogsWhere(ctx context.Context, f SpendLogFilter) ([]SpendLog, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if f.Limit <= 0 {
		f.Limit = 10000
	}
	rows, err := s.pool.Query(ctx, `SELECT `+spendLogColumns+` FROM gateway.spend_logs
		WHERE ($1 = '' OR api_key = $1) AND ($2::timestamptz IS NULL OR start_time >= $2) AND ($3::timestamptz IS NULL OR start_time < $3)
			AND ($5 = '' OR request_id = $5 OR (response_id = $5 AND response_id <> '')) AND ($6 = '' OR user_id = $6)
		ORDER BY start_time DESC, request_id LIMIT $4`, f.Token, nullTime(f.Start), nullTime(f.End), f.Limit, f.RequestID, f.UserID)
	if err != nil {
		return nil, fmt.Errorf("read spend logs: %w", mapErr(err))
	}
	defer rows.Close()
	out := []SpendLog{}
	for rows.Next() {
		var l SpendLog
		var tags string
		if err := rows.Scan(&l.RequestID, &l.APIKey, &l.CallType, &l.Model, &l.ModelID, &l.Spend, &l.PromptTokens, &l.CompletionTokens,
			&l.TotalTokens, &l.StartTime, &l.EndTime, &l.ReplicaID, &l.User, &l.TeamID, &l.OrganizationID, &l.EndUser, &l.Status,
			&l.ResponseID, &l.KeyAlias, &l.TeamAlias, &tags, &l.ProjectID); err != nil {
			return nil, fmt.Errorf("read spend logs: %w", mapErr(err))
		}
		_ = json.Unmarshal([]byte(tags), &l.RequestTags)
		out = append(out, l)
	}
	return out, mapErr(rows.Err())
}

// SpendReport runs one of the /global/spend/* aggregations (spendQueries) over
// gateway.spend_logs and returns its rows as JSON objects (column name → value), in the
// query's order. args are the query's parameters. Errors: ErrUnavailable.
func (s *Store) SpendReport(ctx context.Context, query string, args ...any) ([]map[string]any, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT row_to_json(r)::text FROM (`+query+`) r`, args...)
	if err != nil {
		return nil, fmt.Errorf("spend report: %w", mapErr(err))
	}
	defer rows.Close()
	out := []map[string]any{}
	for rows.Next() {
		var txt string
		if err := rows.Scan(&txt); err != nil {
			return nil, fmt.Errorf("spend report: %w", mapErr(err))
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(txt), &m); err != nil {
			return nil, fmt.Errorf("spend report: %w", err)
		}
		out = append(out, m)
	}
	return out, mapErr(rows.Err())
}

// ResetKeyAndTeamSpend sets every key's and every team's spend total to 0 (LiteLLM
// /global/spend/reset: its VerificationToken and TeamTable spend); the spend logs are kept.
// Errors: ErrUnavailable.
func (s *Store) ResetKeyAndTeamSpend(ctx context.Context) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `UPDATE gateway.key_spend SET spend = 0, updated_at = now()
		WHERE spend <> 0 AND (token ~ '^[0-9a-f]{64}$' OR token LIKE 'team:%')`)
	if err != nil {
		return fmt.Errorf("reset spend: %w", mapErr(err))
	}
	return nil
}

// EnsureBudgetReset schedules the budget reset of a key_spend token every from now (database
// clock) unless one is already scheduled, creating its row when absent; every 0 clears none.
// Errors: ErrUnavailable.
func (s *Store) EnsureBudgetReset(ctx context.Context, token string, every time.Duration) error {
	if every <= 0 {
		return nil
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO gateway.key_spend AS s (token, budget_reset_at)
		VALUES ($1, clock_timestamp() + make_interval(secs => $2::float8))
		ON CONFLICT (token) DO UPDATE SET budget_reset_at = EXCLUDED.budget_reset_at, updated_at = now()
		WHERE s.budget_reset_at IS NULL`, token, every.Seconds())
	if err != nil {
		return fmt.Errorf("schedule budget reset: %w", mapErr(err))
	}
	return nil
}
