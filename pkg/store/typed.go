package store

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
// primary key and version (aliased t), scan fills a Row's Cols from the remaining values (s:
// a full load's slab, nil elsewhere).
type typedReader struct {
	cols string
	scan func(rows pgx.Rows, r *Row, s *slab, extra ...any) error
}

// slab hands out the typed columns of a full load's rows from blocks of loadChunk rows: one
// allocation per block instead of one per row and one per non-null nullable column (pgx boxes
// each in a new pointer; a million keys were five million small objects more to allocate and
// mark at a cold start). Nothing built from a row points into its block: a block is garbage
// once its rows were built (prepare replaces Cols), or with the rows when there is no prepare.
type slab struct {
	keys   []keyHold
	models []ModelCols
}

// keyHold is a key row's columns and the non-pointer holders its nullable columns are scanned
// into (KeyCols' pointers then point here).
type keyHold struct {
	c                      KeyCols
	alias, dur, team, user pgtype.Text
	rpm, tpm, par          pgtype.Int8
	budget                 pgtype.Float8
}

func (s *slab) key() *keyHold {
	if len(s.keys) == 0 {
		s.keys = make([]keyHold, loadChunk)
	}
	h := &s.keys[0]
	s.keys = s.keys[1:]
	return h
}

func (s *slab) model() *ModelCols {
	if s == nil {
		return &ModelCols{}
	}
	if len(s.models) == 0 {
		s.models = make([]ModelCols, loadChunk)
	}
	c := &s.models[0]
	s.models = s.models[1:]
	return c
}

func textPtr(t *pgtype.Text) *string {
	if !t.Valid {
		return nil
	}
	return &t.String
}

func int8Ptr(t *pgtype.Int8) *int64 {
	if !t.Valid {
		return nil
	}
	return &t.Int64
}

const keyCols = "t.key_alias, t.models, t.blocked, t.expires, t.metadata::text, t.rpm_limit, t.tpm_limit, " +
	"t.max_parallel_requests::bigint, t.max_budget, t.budget_duration, t.team_id, t.user_id, t.litellm_fields::text"

var typedReaders = map[ObjectType]typedReader{
	Key: {
		cols: keyCols,
		scan: func(rows pgx.Rows, r *Row, s *slab, extra ...any) error {
			if s != nil {
				return scanKeyHeld(rows, r, s.key())
			}
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
		scan: func(rows pgx.Rows, r *Row, s *slab, extra ...any) error {
			c := s.model()
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

// scanKeyHeld scans a key row of a full load into h (a slab's).
func scanKeyHeld(rows pgx.Rows, r *Row, h *keyHold) error {
	c := &h.c
	if err := rows.Scan(&r.ID, &r.Version, &h.alias, &c.Models, &c.Blocked, &c.Expires, &c.Metadata,
		&h.rpm, &h.tpm, &h.par, &h.budget, &h.dur, &h.team, &h.user, &c.LitellmFields); err != nil {
		return err
	}
	c.Token, c.KeyAlias, c.BudgetDuration, c.TeamID, c.UserID = r.ID, textPtr(&h.alias), textPtr(&h.dur), textPtr(&h.team), textPtr(&h.user)
	c.RPMLimit, c.TPMLimit, c.MaxParallel = int8Ptr(&h.rpm), int8Ptr(&h.tpm), int8Ptr(&h.par)
	if h.budget.Valid {
		c.MaxBudget = &h.budget.Float64
	}
	r.Cols = c
	return nil
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
	return scanRowIn(typ, rows, r, nil, extra...)
}

// scanRowIn is scanRow taking typed columns from s (a full load's; nil: allocated per row).
func scanRowIn(typ ObjectType, rows pgx.Rows, r *Row, s *slab, extra ...any) error {
	r.Type = typ
	if tr, ok := typedReaders[typ]; ok {
		return tr.scan(rows, r, s, extra...)
	}
	return rows.Scan(append([]any{&r.ID, &r.Version, &r.Data}, extra...)...)
}
