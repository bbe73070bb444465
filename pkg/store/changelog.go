package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Change is one gateway.registry_changes row.
type Change struct {
	Seq       int64
	Tx        uint64 // xid8
	Type      ObjectType
	Op        string // insert | update | delete | truncate
	ID        string
	Version   int64
	ChangedAt time.Time
}

// ChangeBatch is the result of ChangesSince.
type ChangeBatch struct {
	Changes   []Change // ordered by seq
	Watermark uint64   // the new watermark: xmin of the snapshot the changes were read in
	HeadSeq   int64
	// PrunedBefore is the change log's retention horizon: a watermark at or below it means
	// changes may be missing and the caller must do a full reconcile.
	PrunedBefore uint64
	// Now is the database's clock when the batch was read (compare changed_at with it).
	Now time.Time
	// More: the read stopped at its limit; the next page starts after the last change's seq.
	More bool
}

// ChangesSince reads the change-log rows whose tx is >= watermark and whose seq is > afterSeq,
// in seq order, at most limit of them (limit <= 0: all), in one snapshot whose xmin becomes
// the next watermark. Transactions still running when the snapshot was taken have tx >= that
// xmin, so their rows are read on a later pass: a late commit is never skipped, and rows may
// be returned twice (re-applying is harmless).
//
// A caller reading page by page (afterSeq the previous page's last seq, each page in its own
// snapshot) keeps the first page's Watermark: a change whose seq precedes a page already read
// but whose commit became visible only later is then read again on the next pass (seq is not
// commit-ordered, sql/001_registry.sql).
//
// A deadline of the caller's own bounds the read instead of the store's operation timeout.
func (s *Store) ChangesSince(ctx context.Context, watermark uint64, afterSeq int64, limit int) (ChangeBatch, error) {
	ctx, cancel := s.callerOrOp(ctx)
	defer cancel()
	var b ChangeBatch
	if limit <= 0 {
		limit = math.MaxInt32
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var wm, pruned string
		if err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text,
			COALESCE((SELECT max(seq) FROM gateway.registry_changes), 0),
			COALESCE((SELECT pruned_before_tx::text FROM gateway.registry_meta), '0'),
			clock_timestamp()`).Scan(&wm, &b.HeadSeq, &pruned, &b.Now); err != nil {
			return err
		}
		b.Watermark, _ = strconv.ParseUint(wm, 10, 64)
		b.PrunedBefore, _ = strconv.ParseUint(pruned, 10, 64)
		rows, err := tx.Query(ctx, `SELECT seq, tx::text, object_type, op, object_id, version, changed_at
			FROM gateway.registry_changes WHERE tx >= $1::text::xid8 AND seq > $2 ORDER BY seq LIMIT $3`,
			strconv.FormatUint(watermark, 10), afterSeq, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c Change
			var txs, typ string
			if err := rows.Scan(&c.Seq, &txs, &typ, &c.Op, &c.ID, &c.Version, &c.ChangedAt); err != nil {
				return err
			}
			c.Tx, _ = strconv.ParseUint(txs, 10, 64)
			c.Type = ObjectType(typ)
			b.Changes = append(b.Changes, c)
		}
		b.More = len(b.Changes) == limit
		return rows.Err()
	})
	if err != nil {
		return ChangeBatch{}, fmt.Errorf("read change log: %w", mapErr(err))
	}
	return b, nil
}

// VisibleChanges reports which of the change-log rows seqs are visible now: a visible row
// means its transaction committed visibly (PostgreSQL docs 13.2 "Transaction Isolation").
func (s *Store) VisibleChanges(ctx context.Context, seqs []int64) (map[int64]bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT seq FROM gateway.registry_changes WHERE seq = ANY($1)`, seqs)
	if err != nil {
		return nil, fmt.Errorf("visible changes: %w", mapErr(err))
	}
	defer rows.Close()
	out := make(map[int64]bool, len(seqs))
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, mapErr(err)
		}
		out[seq] = true
	}
	return out, mapErr(rows.Err())
}

// PruneChanges deletes change-log rows older than retention and advances the horizon.
func (s *Store) PruneChanges(ctx context.Context, retention time.Duration) (int64, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT gateway.prune_registry_changes($1::interval)",
		fmt.Sprintf("%d milliseconds", retention.Milliseconds())).Scan(&n)
	return n, mapErr(err)
}

// Notify sends NOTIFY channel, payload through the pool (pg_notify; PostgreSQL docs "NOTIFY").
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload)
	return mapErr(err)
}

// QueryInt scans the single integer a query returns into dst; for tests and admin tooling.
func (s *Store) QueryInt(ctx context.Context, dst *int, sql string, args ...any) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return mapErr(s.pool.QueryRow(ctx, sql, args...).Scan(dst))
}

// Exec runs one statement; for tests and admin tooling.
func (s *Store) Exec(ctx context.Context, sql string, args ...any) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, sql, args...)
	return mapErr(err)
}
