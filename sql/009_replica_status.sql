-- What each replica reports about itself beyond its change feed (issue 23 "The status page is
-- the cluster's"), upserted with the rest of its gateway.replicas row on every tick and state
-- change (pkg/cluster Reporter), read by GET /sync/cluster and the status page:
--   registries     entries per registry, {"models": n, "keys": n, ...} (the names of /sync/lag)
--   apply_errors   change-feed rows this replica could not apply, since it started
--   lag_samples    change-feed lag samples behind lag_p50_ms/lag_p99_ms (60 s window; 0: none)
--   requests_*     HTTP requests answered since it started (status routes excluded): all,
--                  4xx other than 429, 5xx, and 429
-- Numbered 009: 007 is a2a_task_owner, 008 deployment_cooldowns.
ALTER TABLE gateway.replicas
    ADD COLUMN IF NOT EXISTS registries      jsonb  NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS apply_errors    bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS lag_samples     bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS requests_total  bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS requests_4xx    bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS requests_5xx    bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS requests_429    bigint NOT NULL DEFAULT 0;
