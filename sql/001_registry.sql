-- lockstep registry schema: the database contract of DESIGN.md.
-- Other tools (psql, migrations, admin scripts) write these tables directly; the triggers below
-- make every such write visible to every replica (change log + pg_notify, same transaction).

CREATE SCHEMA IF NOT EXISTS gateway;

-- One global, monotonic version sequence for every registry row. A global sequence (rather
-- than a per-row counter) keeps versions increasing across delete + re-insert of the same id.
-- Row versions are always EVEN (the sequence steps by 2) and a delete's tombstone is
-- OLD.version + 1, always ODD, so a tombstone can never equal a row version: an INSERT that
-- drew its version before waiting on a concurrent DELETE of the same key (its BEFORE trigger
-- runs before the unique check) draws at least OLD.version + 2 and is newer than the
-- tombstone, as its later commit requires.
CREATE SEQUENCE IF NOT EXISTS gateway.registry_version_seq START WITH 2 INCREMENT BY 2 MINVALUE 2;

CREATE TABLE IF NOT EXISTS gateway.models (
    model_id       text PRIMARY KEY,
    model_name     text NOT NULL,
    litellm_params jsonb NOT NULL DEFAULT '{}'::jsonb,
    model_info     jsonb NOT NULL DEFAULT '{}'::jsonb,
    version        bigint NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS models_model_name_idx ON gateway.models (model_name);

CREATE TABLE IF NOT EXISTS gateway.guardrails (
    guardrail_id   text PRIMARY KEY,
    guardrail_name text NOT NULL UNIQUE,
    litellm_params jsonb NOT NULL DEFAULT '{}'::jsonb,
    guardrail_info jsonb NOT NULL DEFAULT '{}'::jsonb,
    status         text NOT NULL DEFAULT 'active'
                   CHECK (status IN ('active', 'pending_review', 'rejected')),
    version        bigint NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS gateway.agents (
    agent_id          text PRIMARY KEY,
    agent_name        text NOT NULL UNIQUE,
    agent_card_params jsonb NOT NULL DEFAULT '{}'::jsonb,
    litellm_params    jsonb NOT NULL DEFAULT '{}'::jsonb,
    version           bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS gateway.api_keys (
    token      text PRIMARY KEY,           -- sha256 hex of the key; the key itself is never stored
    key_alias  text,
    models     text[] NOT NULL DEFAULT '{}',
    blocked    boolean NOT NULL DEFAULT false,
    expires    timestamptz,
    metadata   jsonb NOT NULL DEFAULT '{}'::jsonb,
    version    bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The change log. Written only by triggers. seq orders rows but is NOT commit-ordered; readers
-- use tx (xid8) against a snapshot xmin watermark so a late-committing transaction is never
-- skipped (PostgreSQL docs 9.27.8 "Transaction ID and Snapshot Information Functions").
CREATE TABLE IF NOT EXISTS gateway.registry_changes (
    seq         bigserial PRIMARY KEY,
    tx          xid8 NOT NULL DEFAULT pg_current_xact_id(),
    object_type text NOT NULL,              -- model | guardrail | agent | key
    op          text NOT NULL,              -- insert | update | delete | truncate
    object_id   text NOT NULL,
    version     bigint NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS registry_changes_tx_idx ON gateway.registry_changes (tx);
CREATE INDEX IF NOT EXISTS registry_changes_changed_at_idx ON gateway.registry_changes (changed_at);

-- Single-row bookkeeping: the highest tx pruned from the change log. A replica whose watermark
-- is at or below it cannot catch up from the log and does a full versioned reconcile instead.
CREATE TABLE IF NOT EXISTS gateway.registry_meta (
    id               boolean PRIMARY KEY DEFAULT true CHECK (id),
    pruned_before_tx xid8 NOT NULL DEFAULT '0'::xid8
);
INSERT INTO gateway.registry_meta (id) VALUES (true) ON CONFLICT DO NOTHING;

-- BEFORE INSERT OR UPDATE: stamp a fresh version and updated_at, whatever the writer sent.
CREATE OR REPLACE FUNCTION gateway.registry_bump_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := nextval('gateway.registry_version_seq');
    IF TG_OP = 'INSERT' THEN
        NEW.created_at := COALESCE(NEW.created_at, now());
    ELSE
        NEW.created_at := OLD.created_at;
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

-- AFTER row trigger: append to the change log and notify, in the writer's transaction.
-- TG_ARGV[0] = object type, TG_ARGV[1] = primary key column.
-- The payload is key-only (far below the 8000-byte NOTIFY limit, PostgreSQL docs "NOTIFY").
CREATE OR REPLACE FUNCTION gateway.registry_log_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_id      text;
    v_version bigint;
    v_seq     bigint;
    v_op      text := lower(TG_OP);
BEGIN
    IF TG_OP = 'DELETE' THEN
        v_id := to_jsonb(OLD) ->> TG_ARGV[1];
        v_version := OLD.version + 1;
    ELSE
        v_id := to_jsonb(NEW) ->> TG_ARGV[1];
        v_version := NEW.version;
        IF TG_OP = 'UPDATE' AND (to_jsonb(OLD) ->> TG_ARGV[1]) IS DISTINCT FROM v_id THEN
            -- primary key changed: the old id is gone, exactly like a delete
            INSERT INTO gateway.registry_changes (object_type, op, object_id, version)
            VALUES (TG_ARGV[0], 'delete', to_jsonb(OLD) ->> TG_ARGV[1], OLD.version + 1)
            RETURNING seq INTO v_seq;
            PERFORM pg_notify('gateway_registry', json_build_object(
                'seq', v_seq, 'type', TG_ARGV[0], 'op', 'delete', 'id', to_jsonb(OLD) ->> TG_ARGV[1],
                'v', OLD.version + 1,
                'ts', floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint)::text);
        END IF;
    END IF;
    INSERT INTO gateway.registry_changes (object_type, op, object_id, version)
    VALUES (TG_ARGV[0], v_op, v_id, v_version)
    RETURNING seq INTO v_seq;
    PERFORM pg_notify('gateway_registry', json_build_object(
        'seq', v_seq, 'type', TG_ARGV[0], 'op', v_op, 'id', v_id, 'v', v_version,
        'ts', floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint)::text);
    RETURN NULL;
END $$;

-- Statement-level TRUNCATE: report the truncate with a fresh version; replicas evict every
-- older entry of that type and refuse older versions from then on (a version floor).
CREATE OR REPLACE FUNCTION gateway.registry_log_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_seq bigint;
    v_version bigint := nextval('gateway.registry_version_seq');
BEGIN
    INSERT INTO gateway.registry_changes (object_type, op, object_id, version)
    VALUES (TG_ARGV[0], 'truncate', '', v_version)
    RETURNING seq INTO v_seq;
    PERFORM pg_notify('gateway_registry', json_build_object(
        'seq', v_seq, 'type', TG_ARGV[0], 'op', 'truncate', 'id', '', 'v', v_version,
        'ts', floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint)::text);
    RETURN NULL;
END $$;

DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('models', 'model', 'model_id'),
        ('guardrails', 'guardrail', 'guardrail_id'),
        ('agents', 'agent', 'agent_id'),
        ('api_keys', 'key', 'token')) AS v(tbl, typ, pk)
    LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS registry_bump_version ON gateway.%I', t.tbl);
        EXECUTE format('CREATE TRIGGER registry_bump_version BEFORE INSERT OR UPDATE ON gateway.%I
                        FOR EACH ROW EXECUTE FUNCTION gateway.registry_bump_version()', t.tbl);
        EXECUTE format('DROP TRIGGER IF EXISTS registry_log_change ON gateway.%I', t.tbl);
        EXECUTE format('CREATE TRIGGER registry_log_change AFTER INSERT OR UPDATE OR DELETE ON gateway.%I
                        FOR EACH ROW EXECUTE FUNCTION gateway.registry_log_change(%L, %L)', t.tbl, t.typ, t.pk);
        EXECUTE format('DROP TRIGGER IF EXISTS registry_log_truncate ON gateway.%I', t.tbl);
        EXECUTE format('CREATE TRIGGER registry_log_truncate AFTER TRUNCATE ON gateway.%I
                        FOR EACH STATEMENT EXECUTE FUNCTION gateway.registry_log_truncate(%L)', t.tbl, t.typ);
    END LOOP;
END $$;

-- Prune the change log by age, recording the horizon so lagging replicas know to reconcile.
CREATE OR REPLACE FUNCTION gateway.prune_registry_changes(retention interval) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_max xid8;
    v_n   bigint;
BEGIN
    WITH gone AS (
        DELETE FROM gateway.registry_changes
        WHERE changed_at < clock_timestamp() - retention
          -- never past the oldest running transaction: every replica's watermark (a snapshot
          -- xmin) can reach the horizon, so an old open transaction cannot force full reloads
          AND tx < pg_snapshot_xmin(pg_current_snapshot())
        RETURNING tx
    )
    SELECT max(tx), count(*) INTO v_max, v_n FROM gone;
    IF v_max IS NOT NULL THEN
        UPDATE gateway.registry_meta
        SET pruned_before_tx = greatest(pruned_before_tx, (v_max::text::numeric + 1)::text::xid8);
    END IF;
    RETURN v_n;
END $$;
