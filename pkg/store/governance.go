package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds the queries of key governance (sql/003_key_governance.sql): rate-limit window
// leases, parallel-request slot leases, spend logs and per-key spend totals. None of these
// tables notify: they are written in batches or leased.

// WindowGrant is the outcome of one window lease.
type WindowGrant struct {
	Granted     int64     // units granted now (0..want)
	Used        int64     // units leased in the window by every replica, this grant included
	WindowStart time.Time // the window the grant belongs to (database clock)
	DBNow       time.Time // the database clock when the grant was made
}

// LeaseWindow leases up to want units of a key's limit for the current fixed window of length
// window on the database clock (kind "rpm" or "tpm"), in one statement: the window row is
// inserted, or its used count raised by min(want, limit − used) when used < limit. The sum of
// grants in a window never exceeds the limit in force at each lease, so a lowered limit caps
// what is outstanding from the next lease on. Errors: ErrUnavailable.
func (s *Store) LeaseWindow(ctx context.Context, token, kind string, limit, want int64, window time.Duration) (WindowGrant, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var g WindowGrant
	const q = `
WITH w AS (
    SELECT clock_timestamp() AS now,
           to_timestamp(floor(extract(epoch FROM clock_timestamp()) * 1000 / $5) * $5 / 1000.0) AS ws
)
INSERT INTO gateway.rate_windows AS r (token, kind, window_start, used, last_grant)
SELECT $1, $2, w.ws, least($4::bigint, $3::bigint), least($4::bigint, $3::bigint) FROM w
ON CONFLICT (token, kind, window_start) DO UPDATE
    SET last_grant = least($4::bigint, $3::bigint - r.used),
        used = r.used + least($4::bigint, $3::bigint - r.used)
    WHERE r.used < $3::bigint
RETURNING r.last_grant, r.used, r.window_start, (SELECT now FROM w)`
	err := s.pool.QueryRow(ctx, q, token, kind, limit, want, window.Milliseconds()).Scan(&g.Granted, &g.Used, &g.WindowStart, &g.DBNow)
	if errors.Is(err, pgx.ErrNoRows) {
		// the window exists and is used up: read when it started, to answer Retry-After
		err = s.pool.QueryRow(ctx, `SELECT r.used, r.window_start, clock_timestamp() FROM gateway.rate_windows r
			WHERE r.token = $1 AND r.kind = $2
			  AND r.window_start = to_timestamp(floor(extract(epoch FROM clock_timestamp()) * 1000 / $3) * $3 / 1000.0)`,
			token, kind, window.Milliseconds()).Scan(&g.Used, &g.WindowStart, &g.DBNow)
		if errors.Is(err, pgx.ErrNoRows) { // the window turned meanwhile: nothing granted, try again
			return WindowGrant{DBNow: time.Now()}, nil
		}
	}
	if err != nil {
		return WindowGrant{}, fmt.Errorf("lease %s window of key: %w", kind, mapErr(err))
	}
	return g, nil
}

// LeaseSlots sets this replica's parallel-request slots for a key: want > 0 leases up to want
// more (never letting the live slots of all replicas exceed max), want < 0 gives -want back;
// either way the lease is renewed for ttl. Returns the replica's slots afterwards.
// Errors: ErrUnavailable.
func (s *Store) LeaseSlots(ctx context.Context, token, replica string, want, max int, ttl time.Duration) (int, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var held int
	if err := s.pool.QueryRow(ctx, `SELECT gateway.lease_slots($1, $2, $3, $4, $5)`, token, replica, want, max, ttl.Milliseconds()).Scan(&held); err != nil {
		return 0, fmt.Errorf("lease parallel slots of key: %w", mapErr(err))
	}
	return held, nil
}

// RenewSlots extends every slot lease of replica by ttl (one statement per replica, whatever
// the number of keys). Errors: ErrUnavailable.
func (s *Store) RenewSlots(ctx context.Context, replica string, ttl time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `UPDATE gateway.slot_leases SET expires_at = clock_timestamp() + make_interval(secs => $2 / 1000.0)
		WHERE replica_id = $1 AND slots > 0`, replica, ttl.Milliseconds())
	if err != nil {
		return fmt.Errorf("renew parallel slots: %w", mapErr(err))
	}
	return nil
}

// PruneLimits deletes rate windows that ended more than keep ago and expired empty slot
// leases. Errors: ErrUnavailable.
func (s *Store) PruneLimits(ctx context.Context, keep time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM gateway.rate_windows WHERE window_start < clock_timestamp() - make_interval(secs => $1 / 1000.0)`, keep.Milliseconds())
	b.Queue(`DELETE FROM gateway.slot_leases WHERE expires_at < clock_timestamp() - make_interval(secs => $1 / 1000.0)`, keep.Milliseconds())
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("prune limits: %w", mapErr(err))
	}
	return nil
}

// SpendLog is one gateway.spend_logs row (LiteLLM SpendLogs).
type SpendLog struct {
	RequestID        string    `json:"request_id"`
	APIKey           string    `json:"api_key"` // token
	CallType         string    `json:"call_type"`
	Model            string    `json:"model"`
	ModelID          string    `json:"model_id"`
	Spend            float64   `json:"spend"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	TotalTokens      int64     `json:"total_tokens"`
	StartTime        time.Time `json:"startTime"`
	EndTime          time.Time `json:"endTime"`
	ReplicaID        string    `json:"replica_id"`
	// ModelGroup is the model group that served the call as registered (a wildcard group's
	// pattern, "openai/*"), for metric labels only: not stored.
	ModelGroup string `json:"-"`
	// The key's internal user, team and organization and the request's end user ("" when
	// none; LiteLLM SpendLogs user, team_id, organization_id, end_user): the call's spend also
	// counts toward each of their totals (see OwnerToken).
	User           string `json:"user"`
	TeamID         string `json:"team_id"`
	OrganizationID string `json:"organization_id"`
	EndUser        string `json:"end_user"`
	// Status is "success" or "failure" (LiteLLM SpendLogs.status; sql/010); "" is stored as
	// "success".
	Status string `json:"status"`
	// ExtraTokens are further key_spend tokens the call's spend counts toward: its per-model
	// budgets' (model_max_budget, "model_budget:<kind>:<id>:<model>"), an organization
	// membership's with a budget, its key's project's ("project:<id>", sql/020), only for a
	// call that has one. Not a spend_logs column.
	ExtraTokens []string `json:"-"`
	// ResponseID is the answer's "id" the client saw ("" when none: a failed call, an answer
	// without one); LiteLLM logs it as request_id (sql/013). RequestID stays the call id.
	ResponseID string `json:"response_id"`
	// KeyAlias and TeamAlias are the key's and its team's aliases at call time (LiteLLM
	// metadata user_api_key_alias, user_api_key_team_alias; sql/013).
	KeyAlias  string `json:"key_alias"`
	TeamAlias string `json:"team_alias"`
	// RequestTags are the request's metadata.tags (LiteLLM SpendLogs.request_tags; sql/013).
	RequestTags []string `json:"request_tags"`
	// ProjectID is the key's project ("" none; LiteLLM metadata user_api_key_project_id;
	// sql/020). Its spend also counts toward "project:<id>" (ExtraTokens).
	ProjectID string `json:"project_id"`
	// ProxyBudget: the call also counts toward the proxy-wide budget (litellm_settings
	// max_budget), the key_spend token ProxyBudgetToken. Not stored.
	ProxyBudget bool `json:"-"`
}

// ProxyBudgetUser is LiteLLM's litellm_proxy_budget_name: the internal user whose spend is
// every call's and whose max_budget is litellm_settings.max_budget.
const ProxyBudgetUser = "litellm-proxy-budget"

// OwnerToken is the gateway.key_spend (and rate-limit lease) token under which the spend and
// limits of a user, team, organization or end user are kept: "<kind>:<id>", never a key's
// token (64 hex characters). kind is "user", "team", "organization", "end_user" or
// "team_member" (id TeamMemberID: a user's spend and limits within one team, sql/006).
func OwnerToken(kind, id string) string { return kind + ":" + id }

// TeamMemberID is the owner id of a user's membership of a team: "<team_id>:<user_id>".
func TeamMemberID(teamID, userID string) string { return teamID + ":" + userID }

// Tokens are the key_spend tokens a spend log counts toward: its key's and its owners' (the
// team membership's when the log names both a user and a team).
func (l SpendLog) Tokens() []string {
	out := make([]string, 0, 6)
	if l.APIKey != "" {
		out = append(out, l.APIKey)
	}
	for _, o := range [...]struct{ kind, id string }{{"user", l.User}, {"team", l.TeamID}, {"organization", l.OrganizationID}, {"end_user", l.EndUser}} {
		if o.id != "" {
			out = append(out, OwnerToken(o.kind, o.id))
		}
	}
	if l.User != "" && l.TeamID != "" {
		out = append(out, OwnerToken("team_member", TeamMemberID(l.TeamID, l.User)))
	}
	if l.ProxyBudget && l.User != ProxyBudgetUser {
		out = append(out, OwnerToken("user", ProxyBudgetUser))
	}
	return append(out, l.ExtraTokens...)
}

// BudgetReset asks a flush to reset a key's spend to 0 when its budget_reset_at has passed,
// and to set the next reset Every later (on the database clock).
type BudgetReset struct {
	Token string
	Every time.Duration
}

// KeySpend is a key's spend total as stored.
type KeySpend struct {
	Spend         float64
	BudgetResetAt *time.Time
}

// FlushSpend writes a batch of spend logs and adds their spend to the per-key totals, in one
// implicit transaction (one round trip): first every key in resets whose budget_reset_at has
// passed is reset to 0 with its next reset set, then logs are inserted (a request id already
// stored is skipped, so a retried flush counts nothing twice) and summed into key_spend; last
// the totals of the keys in read are returned (spend 0 once budget_reset_at passed).
// Errors: ErrUnavailable.
func (s *Store) FlushSpend(ctx context.Context, logs []SpendLog, resets []BudgetReset, read []string) (map[string]KeySpend, time.Time, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	b := &pgx.Batch{}
	if len(resets) > 0 {
		toks := make([]string, len(resets))
		secs := make([]float64, len(resets))
		for i, r := range resets {
			toks[i], secs[i] = r.Token, r.Every.Seconds()
		}
		b.Queue(`INSERT INTO gateway.key_spend AS s (token, spend, budget_reset_at)
			SELECT d.token, 0, clock_timestamp() + make_interval(secs => d.secs) FROM unnest($1::text[], $2::float8[]) AS d(token, secs)
			ON CONFLICT (token) DO UPDATE SET spend = 0, budget_reset_at = EXCLUDED.budget_reset_at, updated_at = now()
			WHERE s.budget_reset_at IS NULL OR s.budget_reset_at <= clock_timestamp()`, toks, secs)
	}
	if len(logs) > 0 {
		n := len(logs)
		spend := make([]float64, n)
		pt, ct, tt := make([]int64, n), make([]int64, n), make([]int64, n)
		for i, l := range logs {
			spend[i], pt[i], ct[i], tt[i] = l.Spend, l.PromptTokens, l.CompletionTokens, l.TotalTokens
		}
		// The text and timestamp columns go as array literals, one text parameter each cast by
		// the server ($n::text::text[]): pgx boxes every element of a []string or []time.Time
		// (an allocation per value), which made these columns most of the allocations a call
		// costs the process.
		col := func(f func(l *SpendLog) string) string {
			return arrayLiteral(logs, func(b []byte, l *SpendLog) []byte { return appendArrayText(b, f(l)) })
		}
		// the per-model budget tokens (ExtraTokens) as (request_id, token) pairs
		var ids, toks []string
		for i := range logs {
			for _, tok := range logs[i].ExtraTokens {
				ids, toks = append(ids, logs[i].RequestID), append(toks, tok)
			}
		}
		extraIDs, extraToks := textArray(ids), textArray(toks)
		ts := func(f func(l *SpendLog) time.Time) string {
			return arrayLiteral(logs, func(b []byte, l *SpendLog) []byte { return appendArrayTime(b, f(l)) })
		}
		// the key's total and its owners' ("<kind>:<id>", sql/005) from the logs actually
		// inserted: a retried batch counts nothing twice
		b.Queue(`WITH ins AS (
			INSERT INTO gateway.spend_logs (request_id, api_key, call_type, model, model_id, spend, prompt_tokens,
				completion_tokens, total_tokens, start_time, end_time, replica_id, user_id, team_id, organization_id, end_user, status,
				response_id, key_alias, team_alias, request_tags, project_id)
			SELECT * FROM unnest($1::text::text[], $2::text::text[], $3::text::text[], $4::text::text[], $5::text::text[], $6::float8[], $7::bigint[],
				$8::bigint[], $9::bigint[], $10::text::timestamptz[], $11::text::timestamptz[], $12::text::text[], $13::text::text[], $14::text::text[], $15::text::text[], $16::text::text[],
				$17::text::text[], $18::text::text[], $19::text::text[], $20::text::text[], $23::text::jsonb[], $26::text::text[])
			ON CONFLICT (request_id) DO NOTHING
			RETURNING request_id, api_key, spend, user_id, team_id, organization_id, end_user),
			tot AS (
				SELECT api_key AS token, spend FROM ins WHERE api_key <> ''
				UNION ALL SELECT 'user:' || user_id, spend FROM ins WHERE user_id <> ''
				UNION ALL SELECT 'team:' || team_id, spend FROM ins WHERE team_id <> ''
				UNION ALL SELECT 'organization:' || organization_id, spend FROM ins WHERE organization_id <> ''
				UNION ALL SELECT 'end_user:' || end_user, spend FROM ins WHERE end_user <> ''
				UNION ALL SELECT 'team_member:' || team_id || ':' || user_id, spend FROM ins WHERE team_id <> '' AND user_id <> ''
				UNION ALL SELECT 'user:' || $21::text, spend FROM ins WHERE $22::bool AND user_id <> $21::text
				UNION ALL SELECT x.token, ins.spend FROM ins JOIN unnest($24::text::text[], $25::text::text[]) AS x(request_id, token) USING (request_id))
			INSERT INTO gateway.key_spend AS s (token, spend)
			SELECT token, sum(spend) FROM tot GROUP BY token
			ON CONFLICT (token) DO UPDATE SET spend = s.spend + EXCLUDED.spend, updated_at = now()`,
			col(func(l *SpendLog) string { return l.RequestID }), col(func(l *SpendLog) string { return l.APIKey }),
			col(func(l *SpendLog) string { return l.CallType }), col(func(l *SpendLog) string { return l.Model }),
			col(func(l *SpendLog) string { return l.ModelID }), spend, pt, ct, tt,
			ts(func(l *SpendLog) time.Time { return l.StartTime }), ts(func(l *SpendLog) time.Time { return l.EndTime }),
			col(func(l *SpendLog) string { return l.ReplicaID }), col(func(l *SpendLog) string { return l.User }),
			col(func(l *SpendLog) string { return l.TeamID }), col(func(l *SpendLog) string { return l.OrganizationID }),
			col(func(l *SpendLog) string { return l.EndUser }), col(func(l *SpendLog) string {
				if l.Status == "" {
					return "success"
				}
				return l.Status
			}), col(func(l *SpendLog) string { return l.ResponseID }), col(func(l *SpendLog) string { return l.KeyAlias }),
			col(func(l *SpendLog) string { return l.TeamAlias }), ProxyBudgetUser, proxyBudgeted(logs),
			col(func(l *SpendLog) string { return tagsJSON(l.RequestTags) }), extraIDs, extraToks,
			col(func(l *SpendLog) string { return l.ProjectID }))
	}
	b.Queue(`SELECT s.token, CASE WHEN s.budget_reset_at <= clock_timestamp() THEN 0 ELSE s.spend END, s.budget_reset_at, clock_timestamp()
		FROM gateway.key_spend s WHERE s.token = ANY($1::text[])`, read)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for i := 0; i < b.Len()-1; i++ {
		if _, err := br.Exec(); err != nil {
			return nil, time.Time{}, fmt.Errorf("flush spend: %w", mapErr(err))
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("flush spend: %w", mapErr(err))
	}
	defer rows.Close()
	out := make(map[string]KeySpend, len(read))
	var now time.Time
	for rows.Next() {
		var tok string
		var ks KeySpend
		if err := rows.Scan(&tok, &ks.Spend, &ks.BudgetResetAt, &now); err != nil {
			return nil, time.Time{}, fmt.Errorf("flush spend: %w", mapErr(err))
		}
		out[tok] = ks
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("flush spend: %w", mapErr(err))
	}
	return out, now, nil
}

// tagsJSON renders request tags as a JSON array ("[]" for none).
func tagsJSON(tags []string) string {
	if len(tags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tags)
	return string(b)
}

// proxyBudgeted reports whether the batch counts toward the proxy-wide budget (the flag is
// the same for every call of a replica: litellm_settings.max_budget is configuration).
func proxyBudgeted(logs []SpendLog) bool {
	for i := range logs {
		if logs[i].ProxyBudget {
			return true
		}
	}
	return false
}

// arrayLiteral renders one column of logs as a Postgres array literal ("{...}"), each
// element appended by elem.
func arrayLiteral(logs []SpendLog, elem func(b []byte, l *SpendLog) []byte) string {
	b := make([]byte, 0, 2+len(logs)*24)
	b = append(b, '{')
	for i := range logs {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, &logs[i])
	}
	return string(append(b, '}'))
}

// appendArrayText appends s as a quoted array element: backslash and double quote escaped
// (PostgreSQL "Arrays", 8.15.6: any other character, comma and braces included, stands
// for itself inside double quotes).
func appendArrayText(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// appendArrayTime appends t as a quoted timestamptz element in UTC, truncated to
// microseconds as pgx's binary encoding truncates it.
func appendArrayTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, "2006-01-02 15:04:05.999999")
	return append(b, `+00"`...)
}

// GetKeySpend reads the spend totals of tokens (spend 0 once budget_reset_at passed); a token
// without a row is absent from the result. Errors: ErrUnavailable.
func (s *Store) GetKeySpend(ctx context.Context, tokens []string) (map[string]KeySpend, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT s.token, CASE WHEN s.budget_reset_at <= clock_timestamp() THEN 0 ELSE s.spend END, s.budget_reset_at
		FROM gateway.key_spend s WHERE s.token = ANY($1::text[])`, tokens)
	if err != nil {
		return nil, fmt.Errorf("read key spend: %w", mapErr(err))
	}
	defer rows.Close()
	out := map[string]KeySpend{}
	for rows.Next() {
		var tok string
		var ks KeySpend
		if err := rows.Scan(&tok, &ks.Spend, &ks.BudgetResetAt); err != nil {
			return nil, fmt.Errorf("read key spend: %w", mapErr(err))
		}
		out[tok] = ks
	}
	return out, mapErr(rows.Err())
}

// SpendLogs reads spend logs, newest first, optionally of one key (token) and within
// [start, end) (zero times: unbounded), at most limit rows. Errors: ErrUnavailable.
func (s *Store) SpendLogs(ctx context.Context, token string, start, end time.Time, limit int) ([]SpendLog, error) {
	return s.SpendLogsWhere(ctx, SpendLogFilter{Token: token, Start: start, End: end, Limit: limit})
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ListPage reads one page of rows of typ ordered by created_at (page from 1) and the total
// row count. Errors: ErrUnavailable.
func (s *Store) ListPage(ctx context.Context, typ ObjectType, page, size int) ([]Row, int, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	ti, err := info(typ)
	if err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+ti.Table).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list %ss: %w", typ, mapErr(err))
	}
	rows, err := s.pool.Query(ctx, fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t ORDER BY t.created_at, t.%s LIMIT $1 OFFSET $2",
		ti.PK, ti.Table, ti.PK), size, (page-1)*size)
	if err != nil {
		return nil, 0, fmt.Errorf("list %ss: %w", typ, mapErr(err))
	}
	out, err := scanRows(typ, rows)
	return out, total, err
}

// SetBudgetReset sets a key's next budget reset to every from now on the database clock (every
// 0: never), creating its spend row when absent. Errors: ErrUnavailable.
func (t *TxStore) SetBudgetReset(ctx context.Context, token string, every time.Duration) (*time.Time, error) {
	var at *time.Time
	err := t.tx.QueryRow(ctx, `INSERT INTO gateway.key_spend AS s (token, budget_reset_at)
		VALUES ($1, CASE WHEN $2::float8 > 0 THEN clock_timestamp() + make_interval(secs => $2::float8) END)
		ON CONFLICT (token) DO UPDATE SET budget_reset_at = EXCLUDED.budget_reset_at, updated_at = now()
		RETURNING s.budget_reset_at`, token, every.Seconds()).Scan(&at)
	if err != nil {
		return nil, fmt.Errorf("set budget reset: %w", mapErr(err))
	}
	return at, nil
}

// SetBudgetResetAt sets a key_spend token's next budget reset to at (LiteLLM
// budget_reset_at: when the spend is next reset to 0; the resets after it come every
// budget_duration, FlushSpend), creating its spend row when absent. Errors: ErrUnavailable.
func (t *TxStore) SetBudgetResetAt(ctx context.Context, token string, at time.Time) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO gateway.key_spend AS s (token, budget_reset_at) VALUES ($1, $2)
		ON CONFLICT (token) DO UPDATE SET budget_reset_at = EXCLUDED.budget_reset_at, updated_at = now()`, token, at)
	return mapErr(err)
}

// SetSpend sets the spend total (USD, current budget period) of a key_spend token: a key's
// token or an owner's ("user:<id>", OwnerToken), its budget reset kept (LiteLLM /key/update
// and /user/update "spend"). Every replica reads the new total at its next spend flush; later
// flushes add to it. Errors: ErrUnavailable.
func (t *TxStore) SetSpend(ctx context.Context, token string, spend float64) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO gateway.key_spend AS s (token, spend) VALUES ($1, $2)
		ON CONFLICT (token) DO UPDATE SET spend = EXCLUDED.spend, updated_at = now()`, token, spend)
	return mapErr(err)
}

// MoveKeySpend moves a key's spend row to a new token (key regeneration keeps the spend).
// Errors: ErrUnavailable.
func (t *TxStore) MoveKeySpend(ctx context.Context, from, to string) error {
	_, err := t.tx.Exec(ctx, `UPDATE gateway.key_spend SET token = $2, updated_at = now() WHERE token = $1`, from, to)
	return mapErr(err)
}

// SpendLogsPruneLock is the advisory lock key (SQL expression) a spend-log prune batch takes:
// one replica prunes at a time; the others skip their turn instead of waiting.
const SpendLogsPruneLock = "hashtextextended('lockstep.spend_logs_prune', 0)"

// PruneSpendLogs deletes up to batch spend logs whose start_time is more than olderThan ago
// (database clock), oldest first, in one transaction holding the transaction-level advisory
// lock SpendLogsPruneLock (PostgreSQL docs 9.27.10; it holds through PgBouncer's transaction
// pooling too). ran is false when another replica holds the lock (nothing was deleted).
// Spend totals (gateway.key_spend) are not touched: budgets never depend on old logs.
// Errors: ErrUnavailable.
func (s *Store) PruneSpendLogs(ctx context.Context, olderThan time.Duration, batch int) (deleted int64, ran bool, err error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock("+SpendLogsPruneLock+")").Scan(&ran); err != nil || !ran {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM gateway.spend_logs WHERE request_id IN (
			SELECT request_id FROM gateway.spend_logs
			WHERE start_time < clock_timestamp() - make_interval(secs => $1::float8)
			ORDER BY start_time LIMIT $2)`, olderThan.Seconds(), batch)
		deleted = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("prune spend logs: %w", mapErr(err))
	}
	return deleted, ran, nil
}

// textArray is ss as a text[] literal (for a $n::text::text[] parameter).
func textArray(ss []string) string {
	b := make([]byte, 0, 2+len(ss)*24)
	b = append(b, '{')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendArrayText(b, s)
	}
	return string(append(b, '}'))
}
