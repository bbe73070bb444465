package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cooldown is one row of gateway.deployment_cooldowns (sql/008): a deployment skipped by the
// router of every replica until its end.
type Cooldown struct {
	ModelID string
	// Remaining is how long the cooldown lasts from now (database clock): given to
	// InsertCooldown, returned by ActiveCooldowns.
	Remaining time.Duration
	Reason    string
	ReplicaID string // the replica that decided it
}

// InsertCooldown records a cooldown ending c.Remaining from now on the database clock, and
// prunes rows that ended more than an hour ago (one statement). Errors: ErrUnavailable.
func (s *Store) InsertCooldown(ctx context.Context, c Cooldown) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `WITH pruned AS (
		DELETE FROM gateway.deployment_cooldowns WHERE until < clock_timestamp() - interval '1 hour')
		INSERT INTO gateway.deployment_cooldowns (model_id, until, reason, replica_id)
		VALUES ($1, clock_timestamp() + $2 * interval '1 microsecond', $3, $4)`,
		c.ModelID, c.Remaining.Microseconds(), c.Reason, c.ReplicaID)
	if err != nil {
		return fmt.Errorf("insert cooldown of model %q: %w", c.ModelID, mapErr(err))
	}
	return nil
}

// ActiveCooldowns reads the cooldowns not ended yet, the longest per deployment, with the time
// each has left on the database clock. Errors: ErrUnavailable.
func (s *Store) ActiveCooldowns(ctx context.Context) ([]Cooldown, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (model_id) model_id,
			(extract(epoch FROM until - clock_timestamp()) * 1e6)::bigint, reason, replica_id
		FROM gateway.deployment_cooldowns WHERE until > clock_timestamp()
		ORDER BY model_id, until DESC`)
	if err != nil {
		return nil, fmt.Errorf("read cooldowns: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Cooldown, error) {
		var c Cooldown
		var micros int64
		err := row.Scan(&c.ModelID, &micros, &c.Reason, &c.ReplicaID)
		c.Remaining = time.Duration(micros) * time.Microsecond
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read cooldowns: %w", mapErr(err))
	}
	return out, nil
}
