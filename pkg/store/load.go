package store

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/jackc/pgx/v5"
)

// A full load of a large table (a million keys) is read in parallel: the transaction that
// reads the watermark exports its snapshot (pg_export_snapshot), and each partition — a range
// of the table's heap blocks, read by a TID range scan — runs in a transaction of its own on
// a connection of its own that imports it (SET TRANSACTION SNAPSHOT), so every partition sees
// exactly the rows of the one snapshot (PostgreSQL docs 9.27.5 "Snapshot Synchronization
// Functions"; TID range scans since PostgreSQL 14, a filtered sequential scan before). Postgres
// produces the partitions on as many backends and the replica scans and builds them on as
// many cores, streaming: each partition hands its rows on in chunks (LoadAll's prepare) as it
// reads them.
//
// The partitions' connections are dialled for the load and closed after it, not taken from
// the pool: the load's own transaction holds a pool connection while the partitions run, and
// every type loads at once, so drawing the partitions from the same bounded pool could leave
// each load waiting on a connection another load holds.

// partitionBlocks is the table size (heap blocks of 8 kB) from which a full load is
// partitioned: 4096 blocks is 32 MB, about 100,000 keys. Smaller tables load on one
// connection in well under a second.
const partitionBlocks = 4096

// maxPartitions bounds the partitions of one load (and so the extra connections it opens).
const maxPartitions = 8

// loadChunk is how many rows a partition reads before handing them to prepare.
const loadChunk = 4096

// partitions is how many partitions a full load of a table of n heap blocks uses.
func partitions(n int64) int {
	if n < partitionBlocks {
		return 1
	}
	return int(min(int64(max(2, runtime.GOMAXPROCS(0))), maxPartitions, n/(partitionBlocks/2)))
}

// partitionWhere is the condition selecting partition i of p over a table of n blocks: a
// block range, the last one open-ended (blocks added after the size was read hold no row of
// the snapshot, but reading them costs nothing and proves nothing is missed).
func partitionWhere(i, p int, n int64) string {
	lo := n * int64(i) / int64(p)
	if i == p-1 {
		return fmt.Sprintf("t.ctid >= '(%d,0)'::tid", lo)
	}
	hi := n * int64(i+1) / int64(p)
	return fmt.Sprintf("t.ctid >= '(%d,0)'::tid AND t.ctid < '(%d,0)'::tid", lo, hi)
}

// loadRows reads every loadable row of ti in tx (REPEATABLE READ, its watermark already read),
// partitioned when the table is large. prepare, when not nil, is called on each chunk of rows
// as it is read, from the reading goroutine (concurrently across partitions); it may replace
// a row's Cols.
func (s *Store) loadRows(ctx context.Context, tx pgx.Tx, ti Table, prepare func([]Row)) ([]Row, error) {
	var blocks int64
	var tuples float64 // the planner's row count estimate (pg_class.reltuples; -1: never analyzed)
	var snapID string
	if err := tx.QueryRow(ctx, `SELECT pg_relation_size($1::regclass) / current_setting('block_size')::bigint,
		(SELECT reltuples FROM pg_class WHERE oid = $1::regclass)::float8`, ti.Table).Scan(&blocks, &tuples); err != nil {
		return nil, err
	}
	p := partitions(blocks)
	// each partition's rows are collected in a slice sized from the estimate (its share of
	// the blocks), not grown by doubling: a million rows grown so leave as much again of
	// garbage behind (80 MB) and copy it
	hint := 0
	if tuples > 0 {
		hint = min(int(tuples/float64(p)*1.05)+loadChunk, 1<<24)
	}
	if p == 1 {
		rows, err := tx.Query(ctx, loadSQL(ti, "true"))
		if err != nil {
			return nil, err
		}
		return scanLoaded(ti.Type, rows, prepare, hint)
	}
	if err := tx.QueryRow(ctx, `SELECT pg_export_snapshot()`).Scan(&snapID); err != nil {
		return nil, err
	}
	parts := make([][]Row, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i := 1; i < p; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i], errs[i] = s.loadPartition(ctx, ti, snapID, partitionWhere(i, p, blocks), prepare, hint)
		}()
	}
	// partition 0 on the load's own transaction, while the others run
	if rows, err := tx.Query(ctx, loadSQL(ti, partitionWhere(0, p, blocks))); err != nil {
		errs[0] = err
	} else {
		parts[0], errs[0] = scanLoaded(ti.Type, rows, prepare, hint)
	}
	wg.Wait()
	n := 0
	for i := range parts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		n += len(parts[i])
	}
	out := make([]Row, 0, n)
	for i := range parts {
		out = append(out, parts[i]...)
		parts[i] = nil
	}
	return out, nil
}

// loadPartition reads the loadable rows of ti matching where on a connection of its own, in a
// transaction importing snapshot snapID.
func (s *Store) loadPartition(ctx context.Context, ti Table, snapID, where string, prepare func([]Row), hint int) ([]Row, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var out []Row
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// SET TRANSACTION SNAPSHOT takes no parameter: the id is quoted as a literal
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapID)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, loadSQL(ti, where))
		if err != nil {
			return err
		}
		out, err = scanLoaded(ti.Type, rows, prepare, hint)
		return err
	})
	return out, err
}

// quoteLiteral quotes s as an SQL string literal (standard_conforming_strings, the default
// since PostgreSQL 9.1: only the quote is doubled). A snapshot id is hex digits and dashes.
func quoteLiteral(s string) string {
	b := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b = append(b, '\'')
		}
		b = append(b, s[i])
	}
	return string(append(b, '\''))
}

// scanLoaded scans the rows of a loadSQL query, handing each chunk of loadChunk rows to
// prepare (when not nil) as soon as it is read. hint is the rows expected (0: unknown).
func scanLoaded(typ ObjectType, rows pgx.Rows, prepare func([]Row), hint int) ([]Row, error) {
	defer rows.Close()
	out := make([]Row, 0, hint)
	done := 0 // rows already handed to prepare
	var cols slab
	for rows.Next() {
		var r Row
		if err := scanRowIn(typ, rows, &r, &cols); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, r)
		if prepare != nil && len(out)-done == loadChunk {
			prepare(out[done:])
			done = len(out)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	if prepare != nil && len(out) > done {
		prepare(out[done:])
	}
	return out, nil
}
