package store

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Values are column values for a write: column name → value. JSON columns take []byte or
// json.RawMessage holding JSON text; text[] columns take []string.
type Values map[string]any

func (v Values) sorted() []string {
	cols := make([]string, 0, len(v))
	for c := range v {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	return cols
}

// Insert writes a new row of typ and returns it as loaded (same shape as LoadByIDs; a
// guardrail that is not 'active' is returned too). The version is stamped by trigger.
// Errors: ErrConflict (duplicate key or name), ErrInvalid (constraint), ErrUnavailable.
func (s *Store) Insert(ctx context.Context, typ ObjectType, vals Values) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	cols := vals.sorted()
	args := make([]any, len(cols))
	ph := make([]string, len(cols))
	for i, c := range cols {
		args[i] = vals[c]
		ph[i] = fmt.Sprintf("$%d", i+1)
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	q := fmt.Sprintf("INSERT INTO %s AS t (%s) VALUES (%s) RETURNING t.%s, t.version, row_to_json(t)::text",
		ti.table, strings.Join(cols, ", "), strings.Join(ph, ", "), ti.pk)
	return s.writeOne(ctx, typ, "insert", q, args)
}

// Update sets columns of the row with primary key id and returns the new row.
// Errors: ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable.
func (s *Store) Update(ctx context.Context, typ ObjectType, id string, vals Values) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	cols := vals.sorted()
	args := make([]any, 0, len(cols)+1)
	sets := make([]string, len(cols))
	for i, c := range cols {
		args = append(args, vals[c])
		sets[i] = fmt.Sprintf("%s = $%d", pgx.Identifier{c}.Sanitize(), i+1)
	}
	args = append(args, id)
	q := fmt.Sprintf("UPDATE %s AS t SET %s WHERE t.%s = $%d RETURNING t.%s, t.version, row_to_json(t)::text",
		ti.table, strings.Join(sets, ", "), ti.pk, len(args), ti.pk)
	return s.writeOne(ctx, typ, "update", q, args)
}

// Get reads one row by primary key regardless of load filters (for management reads).
func (s *Store) Get(ctx context.Context, typ ObjectType, id string) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	q := fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t WHERE t.%s = $1", ti.pk, ti.table, ti.pk)
	return s.writeOne(ctx, typ, "get", q, []any{id})
}

// List reads every row of typ regardless of load filters, ordered by created_at.
func (s *Store) List(ctx context.Context, typ ObjectType) ([]Row, error) {
	ti, err := info(typ)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t ORDER BY t.created_at, t.%s", ti.pk, ti.table, ti.pk))
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", typ, mapErr(err))
	}
	return scanRows(typ, rows)
}

// Delete removes the row with primary key id and returns the tombstone version the trigger
// recorded (OLD.version + 1). Errors: ErrNotFound, ErrUnavailable.
func (s *Store) Delete(ctx context.Context, typ ObjectType, id string) (int64, error) {
	ti, err := info(typ)
	if err != nil {
		return 0, err
	}
	var v int64
	err = s.pool.QueryRow(ctx, fmt.Sprintf("DELETE FROM %s t WHERE t.%s = $1 RETURNING t.version + 1", ti.table, ti.pk), id).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("delete %s %q: %w", typ, id, mapErr(err))
	}
	return v, nil
}

// Tx runs fn in one transaction; writes through the TxStore commit or roll back together,
// so a failed multi-row write leaves no trace.
// fn's error is returned as is: TxStore methods map theirs already, and a caller's own error
// (an API error whose text happens to contain "EOF" or "broken pipe") must not be
// re-classified as ErrUnavailable by mapErr's message matching.
func (s *Store) Tx(ctx context.Context, fn func(tx *TxStore) error) error {
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
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	cols := vals.sorted()
	args := make([]any, 0, len(cols)+1)
	sets := make([]string, len(cols))
	for i, c := range cols {
		args = append(args, vals[c])
		sets[i] = fmt.Sprintf("%s = $%d", pgx.Identifier{c}.Sanitize(), i+1)
	}
	args = append(args, id)
	q := fmt.Sprintf("UPDATE %s AS t SET %s WHERE t.%s = $%d RETURNING t.%s, t.version, row_to_json(t)::text",
		ti.table, strings.Join(sets, ", "), ti.pk, len(args), ti.pk)
	var r Row
	if err := t.tx.QueryRow(ctx, q, args...).Scan(&r.ID, &r.Version, &r.Data); err != nil {
		return Row{}, fmt.Errorf("update %s %q: %w", typ, id, mapErr(err))
	}
	r.Type = typ
	return r, nil
}

// Get is Store.Get inside the transaction. Errors: ErrNotFound, ErrUnavailable.
func (t *TxStore) Get(ctx context.Context, typ ObjectType, id string) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	var r Row
	q := fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t WHERE t.%s = $1", ti.pk, ti.table, ti.pk)
	if err := t.tx.QueryRow(ctx, q, id).Scan(&r.ID, &r.Version, &r.Data); err != nil {
		return Row{}, fmt.Errorf("get %s %q: %w", typ, id, mapErr(err))
	}
	r.Type = typ
	return r, nil
}

// LockTable takes a SHARE ROW EXCLUSIVE lock on typ's table for the transaction, serialising
// read-modify-write operations spanning many rows (access groups).
func (t *TxStore) LockTable(ctx context.Context, typ ObjectType) error {
	ti, err := info(typ)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, "LOCK TABLE "+ti.table+" IN SHARE ROW EXCLUSIVE MODE")
	return mapErr(err)
}

// List is Store.List inside the transaction.
func (t *TxStore) List(ctx context.Context, typ ObjectType) ([]Row, error) {
	ti, err := info(typ)
	if err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(ctx, fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t ORDER BY t.created_at, t.%s", ti.pk, ti.table, ti.pk))
	if err != nil {
		return nil, mapErr(err)
	}
	return scanRows(typ, rows)
}

func (s *Store) writeOne(ctx context.Context, typ ObjectType, op, q string, args []any) (Row, error) {
	var r Row
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&r.ID, &r.Version, &r.Data); err != nil {
		return Row{}, fmt.Errorf("%s %s: %w", op, typ, mapErr(err))
	}
	r.Type = typ
	return r, nil
}
