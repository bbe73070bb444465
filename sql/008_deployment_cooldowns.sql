-- Router cooldowns shared by every replica (issue 20; DESIGN.md "Router state shared without
-- Redis"). A cooldown is an event, not a counter: the replica that decides a deployment must
-- cool down (more failures this minute than allowed_fails) inserts one row; every replica
-- reads the active rows on its cluster heartbeat tick (every 2 s) and skips the deployment
-- until `until` (database clock). No trigger: nothing here NOTIFYs or enters
-- gateway.registry_changes (DESIGN.md "Non-notifying shared tables"). Rows ended more than an
-- hour ago are pruned by the next insert.
CREATE TABLE IF NOT EXISTS gateway.deployment_cooldowns (
    id         bigserial PRIMARY KEY,
    model_id   text NOT NULL,
    until      timestamptz NOT NULL,
    reason     text NOT NULL DEFAULT '',
    replica_id text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS deployment_cooldowns_until ON gateway.deployment_cooldowns (until);
