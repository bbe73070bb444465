package store

import (
	"time"

	"github.com/jackc/pgx/v5"
)

// Typed reads. The change feed's loads (LoadAll, Reload, LoadByName) of the two registries
// that grow large — keys (a million, with per-user and per-end-user keys) and models — read
// typed columns in pgx's binary format instead of row_to_json text, so building a runtime
// object costs no JSON decode of the row (a 1M-key cold start spent most of its CPU in
// encoding/json). Such a Row carries its columns in Cols (*KeyCols, *ModelCols) and no Data;
// every other path (writes' RETURNING, LoadByIDs, the other registries) still carries the
// row_to_json text in Data, so a builder accepts either.

// KeyCols is a gateway.api_keys row as typed columns (sql/001, 003, 005). Nullable columns
// are pointers (nil: SQL NULL).
type KeyCols struct {
	Token          string
	KeyAlias       *string
	Models         []string
	Blocked        bool
	Expires        *time.Time
	Metadata       []byte // jsonb as text
	RPMLimit       *int64
	TPMLimit       *int64
	MaxParallel    *int64
	MaxBudget      *float64
	BudgetDuration *string
	TeamID         *string
	UserID         *string
	LitellmFields  []byte // jsonb as text (sql/011): LiteLLM fields without a column
}

// ModelCols is a gateway.models row as typed columns (sql/001). The jsonb columns are their
// text.
type ModelCols struct {
	ModelID       string
	ModelName     string
	LitellmParams []byte
	ModelInfo     []byte
}

// typedReader reads one table's rows as typed columns: cols is the select list after the
// primary key and version (aliased t), scan fills a Row's Cols from the remaining values.
type typedReader struct {
	cols string
	scan func(rows pgx.Rows, r *Row, extra ...any) error
}

var typedReaders = map[ObjectType]typedReader{
	Key: {
		cols: "t.key_alias, t.models, t.blocked, t.expires, t.metadata::text, t.rpm_limit, t.tpm_limit, " +
			"t.max_parallel_requests::bigint, t.max_budget, t.budget_duration, t.team_id, t.user_id, t.litellm_fields::text",
		scan: func(rows pgx.Rows, r *Row, extra ...any) error {
			c := &KeyCols{}
			dst := append([]any{&r.ID, &r.Version, &c.KeyAlias, &c.Models, &c.Blocked, &c.Expires, &c.Metadata,
				&c.RPMLimit, &c.TPMLimit, &c.MaxParallel, &c.MaxBudget, &c.BudgetDuration, &c.TeamID, &c.UserID, &c.LitellmFields}, extra...)
			if err := rows.Scan(dst...); err != nil {
				return err
			}
			c.Token = r.ID
			r.Cols = c
			return nil
		},
	},
	Model: {
		cols: "t.model_name, t.litellm_params::text, t.model_info::text",
		scan: func(rows pgx.Rows, r *Row, extra ...any) error {
			c := &ModelCols{}
			dst := append([]any{&r.ID, &r.Version, &c.ModelName, &c.LitellmParams, &c.ModelInfo}, extra...)
			if err := rows.Scan(dst...); err != nil {
				return err
			}
			c.ModelID = r.ID
			r.Cols = c
			return nil
		},
	},
}

// selectList is what a load selects after the primary key and version: the typed columns
// of a typed table, else the row as JSON text.
func selectList(typ ObjectType) string {
	if tr, ok := typedReaders[typ]; ok {
		return tr.cols
	}
	return "row_to_json(t)::text"
}

// scanRow scans one loaded row (primary key, version, selectList(typ), then extra).
func scanRow(typ ObjectType, rows pgx.Rows, r *Row, extra ...any) error {
	r.Type = typ
	if tr, ok := typedReaders[typ]; ok {
		return tr.scan(rows, r, extra...)
	}
	return rows.Scan(append([]any{&r.ID, &r.Version, &r.Data}, extra...)...)
}
