package store

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"lockstep/pkg/telemetry"
)

// Values are column values for a write: column name → value. JSON columns take []byte or
// json.RawMessage holding JSON text; text[] columns take []string.
type Values map[string]any

// JSONMerge is a jsonb column value an update merges into the stored object (Postgres jsonb
// "||": top-level members replaced, others kept; Postgres docs 9.16 "JSON Functions and
// Operators"); an insert stores it as is. The text must be a JSON object.
type JSONMerge []byte

func (v Values) sorted() []string {
	cols := make([]string, 0, len(v))
	for c := range v {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	return cols
}

// querier is what a pool and a transaction share; every write query is written once on it.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Insert writes a new row of typ and returns it as loaded (same shape as LoadByIDs; a
// guardrail that is not 'active' is returned too). The version is stamped by trigger.
// Errors: ErrConflict (duplicate key or name), ErrInvalid (constraint), ErrUnavailable.
func (s *Store) Insert(ctx context.Context, typ ObjectType, vals Values) (Row, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return insert(ctx, s.pool, typ, vals)
}

func insert(ctx context.Context, q querier, typ ObjectType, vals Values) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	cols := vals.sorted()
	args := make([]any, len(cols))
	ph := make([]string, len(cols))
	for i, c := range cols {
		args[i] = vals[c]
		if m, ok := vals[c].(JSONMerge); ok {
			args[i] = []byte(m)
		}
		ph[i] = fmt.Sprintf("$%d", i+1)
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	sql := fmt.Sprintf("INSERT INTO %s AS t (%s) VALUES (%s) RETURNING t.%s, t.version, row_to_json(t)::text",
		ti.Table, strings.Join(cols, ", "), strings.Join(ph, ", "), ti.PK)
	return queryRow(ctx, q, typ, "insert", sql, args)
}

// Update sets columns of the row with primary key id and returns the new row.
// Errors: ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable.
func (s *Store) Update(ctx context.Context, typ ObjectType, id string, vals Values) (Row, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return update(ctx, s.pool, typ, id, vals)
}

// Get reads one row by primary key regardless of load filters (for management reads).
// Errors: ErrNotFound, ErrUnavailable.
func (s *Store) Get(ctx context.Context, typ ObjectType, id string) (Row, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return get(ctx, s.pool, typ, id)
}

// List reads every row of typ regardless of load filters, ordered by created_at.
func (s *Store) List(ctx context.Context, typ ObjectType) ([]Row, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return list(ctx, s.pool, typ)
}

func update(ctx context.Context, q querier, typ ObjectType, id string, vals Values) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	cols := vals.sorted()
	args := make([]any, 0, len(cols)+1)
	sets := make([]string, len(cols))
	for i, c := range cols {
		id := pgx.Identifier{c}.Sanitize()
		if m, ok := vals[c].(JSONMerge); ok {
			args = append(args, []byte(m))
			sets[i] = fmt.Sprintf("%s = t.%s || $%d::jsonb", id, id, i+1)
			continue
		}
		args = append(args, vals[c])
		sets[i] = fmt.Sprintf("%s = $%d", id, i+1)
	}
	args = append(args, id)
	sql := fmt.Sprintf("UPDATE %s AS t SET %s WHERE t.%s = $%d RETURNING t.%s, t.version, row_to_json(t)::text",
		ti.Table, strings.Join(sets, ", "), ti.PK, len(args), ti.PK)
	return queryRow(ctx, q, typ, "update", sql, args)
}

func get(ctx context.Context, q querier, typ ObjectType, id string) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	sql := fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t WHERE t.%s = $1", ti.PK, ti.Table, ti.PK)
	return queryRow(ctx, q, typ, "get", sql, []any{id})
}

func list(ctx context.Context, q querier, typ ObjectType) ([]Row, error) {
	ti, err := info(typ)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t ORDER BY t.created_at, t.%s", ti.PK, ti.Table, ti.PK))
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", typ, mapErr(err))
	}
	return scanRows(typ, rows)
}

func queryRow(ctx context.Context, q querier, typ ObjectType, op, sql string, args []any) (Row, error) {
	var r Row
	if err := q.QueryRow(ctx, sql, args...).Scan(&r.ID, &r.Version, &r.Data); err != nil {
		return Row{}, fmt.Errorf("%s %s: %w", op, typ, mapErr(err))
	}
	r.Type = typ
	if op != "get" {
		telemetry.RecordChange(ctx, string(typ), op, r.ID, r.Version) // on the write's span, when tracing
	}
	return r, nil
}

// Delete removes the row with primary key id and returns the tombstone version the trigger
// recorded (OLD.version + 1). Errors: ErrNotFound, ErrUnavailable.
func (s *Store) Delete(ctx context.Context, typ ObjectType, id string) (int64, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	ti, err := info(typ)
	if err != nil {
		return 0, err
	}
	var v int64
	err = s.pool.QueryRow(ctx, fmt.Sprintf("DELETE FROM %s t WHERE t.%s = $1 RETURNING t.version + 1", ti.Table, ti.PK), id).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("delete %s %q: %w", typ, id, mapErr(err))
	}
	telemetry.RecordChange(ctx, string(typ), "delete", id, v)
	return v, nil
}

// Tx runs fn in one transaction; writes through the TxStore commit or roll back together,
// so a failed multi-row write leaves no trace.
// fn's error is returned as is: TxStore methods map theirs already, and a caller's own error
// (an API error whose text happens to contain "EOF" or "broken pipe") must not be
// re-classified as ErrUnavailable by mapErr's message matching.
func (s *Store) Tx(ctx context.Context, fn func(tx *TxStore) error) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var fnErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		fnErr = fn(&TxStore{tx: tx})
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	return mapErr(err)
}

// TxStore is the write API inside Store.Tx.
type TxStore struct{ tx pgx.Tx }

// Update is Store.Update inside the transaction.
func (t *TxStore) Update(ctx context.Context, typ ObjectType, id string, vals Values) (Row, error) {
	return update(ctx, t.tx, typ, id, vals)
}

// Get is Store.Get inside the transaction. Errors: ErrNotFound, ErrUnavailable.
func (t *TxStore) Get(ctx context.Context, typ ObjectType, id string) (Row, error) {
	return get(ctx, t.tx, typ, id)
}

// List is Store.List inside the transaction.
func (t *TxStore) List(ctx context.Context, typ ObjectType) ([]Row, error) {
	return list(ctx, t.tx, typ)
}

// LockName takes the transaction-scoped advisory lock named name (pg_advisory_xact_lock of
// its hashtextextended, Postgres "Advisory Locks"), held until commit or rollback: writers
// taking the same name run one after another, nothing else waits.
func (t *TxStore) LockName(ctx context.Context, name string) error {
	_, err := t.tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", name)
	return mapErr(err)
}

// LockTable takes a SHARE ROW EXCLUSIVE lock on typ's table for the transaction, serialising
// read-modify-write operations spanning many rows (access groups, model edits)
// (PostgreSQL docs 13.3.1 "Table-Level Locks").
func (t *TxStore) LockTable(ctx context.Context, typ ObjectType) error {
	ti, err := info(typ)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, "LOCK TABLE "+ti.Table+" IN SHARE ROW EXCLUSIVE MODE")
	return mapErr(err)
}
