package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReplicaStatus is one gateway.replicas row (sql/004_freshness.sql, sql/009_replica_status.sql):
// what a replica last reported about its change feed, its registries and the requests it
// answered. HeartbeatAge is computed on the database's clock when read.
type ReplicaStatus struct {
	ReplicaID    string
	Addr         string
	Source       string
	State        string
	Reason       string
	AppliedSeq   int64
	LagP50Ms     float64
	LagP99Ms     float64
	LagSamples   int64 // samples behind LagP50Ms/LagP99Ms (60 s window; 0: none)
	Version      string
	StartedAt    time.Time
	HeartbeatAge time.Duration
	// Registries is the number of entries per registry, by /sync/lag's names ("models", ...);
	// empty until the replica's server reports them.
	Registries  map[string]int
	ApplyErrors int64 // change-feed rows not applied, since start
	Requests    RequestCounts
}

// RequestCounts are the HTTP requests a replica answered since it started (the status routes
// /sync/*, /ui, /metrics and /health/* excluded), by outcome.
type RequestCounts struct {
	Total        int64 `json:"total"`
	ClientErrors int64 `json:"client_errors"` // 4xx other than 429
	ServerErrors int64 `json:"server_errors"` // 5xx
	RateLimited  int64 `json:"rate_limited"`  // 429
}

// UpsertReplica writes this replica's row, stamping heartbeat_at with the database's clock.
// Errors: ErrUnavailable.
func (s *Store) UpsertReplica(ctx context.Context, r ReplicaStatus) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	regs := r.Registries
	if regs == nil {
		regs = map[string]int{}
	}
	regsJSON, err := json.Marshal(regs)
	if err != nil {
		return fmt.Errorf("upsert replica %q: registries: %w", r.ReplicaID, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO gateway.replicas AS t (replica_id, addr, source, state, reason,
			applied_seq, lag_p50_ms, lag_p99_ms, version, started_at, heartbeat_at, lag_samples, registries,
			apply_errors, requests_total, requests_4xx, requests_5xx, requests_429)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, clock_timestamp(), $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (replica_id) DO UPDATE SET addr = EXCLUDED.addr, source = EXCLUDED.source,
			state = EXCLUDED.state, reason = EXCLUDED.reason, applied_seq = EXCLUDED.applied_seq,
			lag_p50_ms = EXCLUDED.lag_p50_ms, lag_p99_ms = EXCLUDED.lag_p99_ms, version = EXCLUDED.version,
			started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at,
			lag_samples = EXCLUDED.lag_samples, registries = EXCLUDED.registries,
			apply_errors = EXCLUDED.apply_errors, requests_total = EXCLUDED.requests_total,
			requests_4xx = EXCLUDED.requests_4xx, requests_5xx = EXCLUDED.requests_5xx,
			requests_429 = EXCLUDED.requests_429`,
		r.ReplicaID, r.Addr, r.Source, r.State, r.Reason, r.AppliedSeq, r.LagP50Ms, r.LagP99Ms, r.Version, r.StartedAt,
		r.LagSamples, string(regsJSON), r.ApplyErrors, r.Requests.Total, r.Requests.ClientErrors, r.Requests.ServerErrors,
		r.Requests.RateLimited)
	if err != nil {
		return fmt.Errorf("upsert replica %q: %w", r.ReplicaID, mapErr(err))
	}
	return nil
}

// ListReplicas reads every replica row, ordered by replica_id.
func (s *Store) ListReplicas(ctx context.Context) ([]ReplicaStatus, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT replica_id, addr, source, state, reason, applied_seq, lag_p50_ms,
			lag_p99_ms, version, started_at, (extract(epoch FROM clock_timestamp() - heartbeat_at) * 1e6)::bigint,
			lag_samples, registries, apply_errors, requests_total, requests_4xx, requests_5xx, requests_429
		FROM gateway.replicas ORDER BY replica_id`)
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReplicaStatus, error) {
		var r ReplicaStatus
		var ageMicros int64
		var regs []byte
		err := row.Scan(&r.ReplicaID, &r.Addr, &r.Source, &r.State, &r.Reason, &r.AppliedSeq, &r.LagP50Ms,
			&r.LagP99Ms, &r.Version, &r.StartedAt, &ageMicros, &r.LagSamples, &regs, &r.ApplyErrors,
			&r.Requests.Total, &r.Requests.ClientErrors, &r.Requests.ServerErrors, &r.Requests.RateLimited)
		r.HeartbeatAge = time.Duration(ageMicros) * time.Microsecond
		if err == nil {
			// written by UpsertReplica as a JSON object of counts; anything else reads as none
			_ = json.Unmarshal(regs, &r.Registries)
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", mapErr(err))
	}
	return out, nil
}

// DeleteReplica removes a replica's row (clean shutdown).
func (s *Store) DeleteReplica(ctx context.Context, id string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `DELETE FROM gateway.replicas WHERE replica_id = $1`, id)
	return mapErr(err)
}

// PruneReplicas removes rows silent for longer than silent (replicas that died without
// deleting their row); returns how many.
func (s *Store) PruneReplicas(ctx context.Context, silent time.Duration) (int64, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM gateway.replicas WHERE heartbeat_at < clock_timestamp() - $1::interval`,
		fmt.Sprintf("%d milliseconds", silent.Milliseconds()))
	if err != nil {
		return 0, mapErr(err)
	}
	return tag.RowsAffected(), nil
}
