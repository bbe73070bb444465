-- Freshness (issue 10): shared state that is NOT a registry. Neither table has a trigger:
-- nothing here is appended to gateway.registry_changes or NOTIFYs (DESIGN.md "Non-notifying
-- shared tables": NOTIFY takes a global lock at commit, and these rows are written on a timer
-- or per task, not per registry change).

-- gateway.replicas: one row per running replica, upserted by that replica every 2 s (its
-- change-feed state and lag), read by GET /sync/cluster. A replica deletes its row on a clean
-- shutdown; a row silent for more than 10 s is reported stale, and one silent for 10 minutes
-- is pruned by the replicas still running.
CREATE TABLE IF NOT EXISTS gateway.replicas (
    replica_id   text PRIMARY KEY,
    addr         text NOT NULL DEFAULT '',
    source       text NOT NULL DEFAULT '',
    state        text NOT NULL DEFAULT '',
    reason       text NOT NULL DEFAULT '',
    applied_seq  bigint NOT NULL DEFAULT 0,
    lag_p50_ms   double precision NOT NULL DEFAULT 0,
    lag_p99_ms   double precision NOT NULL DEFAULT 0,
    version      text NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- gateway.a2a_tasks: A2A tasks created by message/stream, so that tasks/get and tasks/cancel
-- work on every replica. The replica running the stream writes the row at creation, on state
-- changes and at most every 250 ms while text streams (not per chunk); a tasks/cancel on any
-- replica sets cancel_requested and the state, and the running replica polls its own running
-- tasks' rows and stops the stream. Bounded: the stored artifact text is capped per task, the
-- table is capped in rows, and rows older than 24 h are pruned.
CREATE TABLE IF NOT EXISTS gateway.a2a_tasks (
    task_id          text PRIMARY KEY,
    agent_id         text NOT NULL,
    replica_id       text NOT NULL,
    state            text NOT NULL,
    task             jsonb NOT NULL,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS a2a_tasks_created_at ON gateway.a2a_tasks (created_at);
CREATE INDEX IF NOT EXISTS a2a_tasks_running ON gateway.a2a_tasks (replica_id) WHERE state IN ('submitted', 'working');
