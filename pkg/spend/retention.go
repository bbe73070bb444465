package spend

import (
	"context"
	"time"
)

// Spend-log retention (LiteLLM general_settings.maximum_spend_logs_retention_period and
// maximum_spend_logs_retention_interval, docs "Maximum Retention Period for Spend Logs"):
// every Interval, spend logs older than Period are deleted in batches of RetentionBatch, each
// batch one transaction under a Postgres advisory lock, so one replica prunes at a time and the
// others skip (no Redis, unlike LiteLLM's distributed lock). Spend totals and budgets are not
// affected: they are kept in gateway.key_spend, not summed from the logs.

// Pruner deletes old spend logs (implemented by *store.Store): up to batch logs older than
// olderThan; ran is false when another replica holds the prune lock.
type Pruner interface {
	PruneSpendLogs(ctx context.Context, olderThan time.Duration, batch int) (deleted int64, ran bool, err error)
}

// RetentionBatch is the most spend logs one prune transaction deletes (LiteLLM deletes 1000
// per batch as well).
const RetentionBatch = 1000

// DefaultRetentionInterval is how often the prune runs when only the period is set (LiteLLM:
// daily).
const DefaultRetentionInterval = 24 * time.Hour

// PruneOnce deletes every spend log older than period, batch by batch, until a batch comes back
// short, another replica holds the lock, or ctx ends. Returns how many it deleted.
func PruneOnce(ctx context.Context, p Pruner, period time.Duration, batch int) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		n, ran, err := p.PruneSpendLogs(ctx, period, batch)
		total += n
		if err != nil || !ran || n < int64(batch) {
			return total, err
		}
	}
	return total, ctx.Err()
}

// retentionLoop prunes every Interval (the first run one Interval after start, so replicas
// starting together do not all begin at once; the lock keeps them apart anyway).
func (t *Tracker) retentionLoop(ctx context.Context, p Pruner) {
	every := t.cfg.RetentionInterval
	if every <= 0 {
		every = DefaultRetentionInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.stop:
			return
		case <-tick.C:
		}
		n, err := PruneOnce(ctx, p, t.cfg.RetentionPeriod, RetentionBatch)
		t.pruned.Add(n)
		if err != nil && ctx.Err() == nil {
			t.cfg.Log.Warn().Err(err).Int64("deleted", n).Msg("spend log retention: prune failed; retried at the next interval")
		} else if n > 0 {
			t.cfg.Log.Info().Int64("deleted", n).Dur("older_than", t.cfg.RetentionPeriod).Msg("spend log retention: pruned")
		}
	}
}
