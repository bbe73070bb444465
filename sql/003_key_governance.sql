-- Key governance (issue 9; DESIGN.md "Cluster-wide limits by leases", "Non-notifying shared
-- tables"; API.md "Keys (admin) and their limits").
--
-- A key's SETTINGS (limits, budget, budget duration) are columns of gateway.api_keys, so they
-- travel to every replica through the keys change feed like any other key field. The STATE
-- that changes per call — spend, rate-limit windows, parallel-request slots, spend logs — lives
-- in the tables below, which have NO notifying triggers (NOTIFY takes a global lock at commit):
-- they are written in batches or leased.

ALTER TABLE gateway.api_keys
    ADD COLUMN IF NOT EXISTS rpm_limit             bigint CHECK (rpm_limit IS NULL OR rpm_limit >= 0),
    ADD COLUMN IF NOT EXISTS tpm_limit             bigint CHECK (tpm_limit IS NULL OR tpm_limit >= 0),
    ADD COLUMN IF NOT EXISTS max_parallel_requests integer CHECK (max_parallel_requests IS NULL OR max_parallel_requests >= 0),
    ADD COLUMN IF NOT EXISTS max_budget            double precision CHECK (max_budget IS NULL OR max_budget >= 0),
    ADD COLUMN IF NOT EXISTS budget_duration       text;

-- Per-key spend total (USD) in the current budget period, summed from the spend logs as they
-- are flushed. budget_reset_at: when spend next resets to 0 (NULL: never; keys without a
-- budget_duration). Rows are keyed by token and carry no foreign key: a key written straight
-- into gateway.api_keys gets its row on its first flushed call.
CREATE TABLE IF NOT EXISTS gateway.key_spend (
    token           text PRIMARY KEY,
    spend           double precision NOT NULL DEFAULT 0,
    budget_reset_at timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- One row per upstream call (LiteLLM's SpendLogs), written in batches by each replica.
CREATE TABLE IF NOT EXISTS gateway.spend_logs (
    request_id        text PRIMARY KEY,
    api_key           text NOT NULL,          -- the key's token (sha256 hex), never the key
    call_type         text NOT NULL,          -- route: /chat/completions, /responses, anthropic_messages, /embeddings, a2a
    model             text NOT NULL,          -- model group requested
    model_id          text NOT NULL DEFAULT '',
    spend             double precision NOT NULL DEFAULT 0,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    total_tokens      bigint NOT NULL DEFAULT 0,
    start_time        timestamptz NOT NULL,
    end_time          timestamptz NOT NULL,
    replica_id        text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS spend_logs_api_key_start_idx ON gateway.spend_logs (api_key, start_time);
CREATE INDEX IF NOT EXISTS spend_logs_start_idx ON gateway.spend_logs (start_time);

-- Rate-limit windows: one row per key, kind and fixed window (window_start on the database
-- clock). used = units leased to replicas so far in the window (requests for rpm, tokens for
-- tpm); remaining is the key's limit in force at each lease minus used. A replica leases with
-- one conditional statement (see store.LeaseWindow) and admits locally from its lease.
CREATE TABLE IF NOT EXISTS gateway.rate_windows (
    token        text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('rpm', 'tpm')),
    window_start timestamptz NOT NULL,
    used         bigint NOT NULL DEFAULT 0,
    last_grant   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (token, kind, window_start)
);
CREATE INDEX IF NOT EXISTS rate_windows_start_idx ON gateway.rate_windows (window_start);

-- Parallel-request slots leased per key and replica; a lease not renewed by expires_at (a dead
-- replica's) no longer counts.
CREATE TABLE IF NOT EXISTS gateway.slot_leases (
    token      text NOT NULL,
    replica_id text NOT NULL,
    slots      integer NOT NULL CHECK (slots >= 0),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (token, replica_id)
);

-- lease_slots sets this replica's slots for a key to `held` + up to `want` more, never letting
-- the live slots of all replicas exceed p_max; returns the replica's slots after the call.
-- Serialised per key by a transaction-level advisory lock (PostgreSQL docs 9.27.10), so two
-- replicas leasing the last slot at once cannot both get it. want <= 0 gives slots back
-- (down to `held` + want, never below 0) and renews the lease.
CREATE OR REPLACE FUNCTION gateway.lease_slots(p_token text, p_replica text, p_want integer,
                                               p_max integer, p_ttl_ms bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_others integer;
    v_mine   integer;
    v_new    integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('lockstep.slots:' || p_token, 0));
    SELECT COALESCE(sum(slots) FILTER (WHERE replica_id <> p_replica), 0),
           COALESCE(max(slots) FILTER (WHERE replica_id = p_replica), 0)
      INTO v_others, v_mine
      FROM gateway.slot_leases
     WHERE token = p_token AND expires_at > clock_timestamp();
    IF p_want > 0 THEN
        v_new := v_mine + greatest(0, least(p_want, p_max - v_others - v_mine));
    ELSE
        v_new := greatest(0, v_mine + p_want);
    END IF;
    INSERT INTO gateway.slot_leases AS l (token, replica_id, slots, expires_at)
    VALUES (p_token, p_replica, v_new, clock_timestamp() + make_interval(secs => p_ttl_ms / 1000.0))
    ON CONFLICT (token, replica_id) DO UPDATE SET slots = EXCLUDED.slots, expires_at = EXCLUDED.expires_at;
    RETURN v_new;
END $$;
