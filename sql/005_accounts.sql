-- Teams, internal users, organizations and end users (LiteLLM's "customers") as registries on
-- the change feed (issue 13): the same version stamp, change log and pg_notify triggers as the
-- tables of 001_registry.sql, so a team made through one replica (or psql) governs keys on every
-- replica at once, and a deleted one stops doing so just as fast.
--
-- Column names are LiteLLM's (LiteLLM_TeamTable, LiteLLM_UserTable, LiteLLM_OrganizationTable,
-- LiteLLM_EndUserTable). Spend is not kept here: these tables NOTIFY on every write, and spend
-- changes on every call (DESIGN.md "Non-notifying shared tables").
--
-- No foreign keys: other tools write these tables in any order. The gateway refuses a key whose
-- team does not exist (or is blocked) at request time.

CREATE TABLE IF NOT EXISTS gateway.organizations (
    organization_id       text PRIMARY KEY,
    organization_alias    text,
    models                text[] NOT NULL DEFAULT '{}',
    max_budget            double precision,
    budget_duration       text,
    tpm_limit             bigint,
    rpm_limit             bigint,
    max_parallel_requests bigint,
    blocked               boolean NOT NULL DEFAULT false,
    metadata              jsonb NOT NULL DEFAULT '{}'::jsonb,
    version               bigint NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS gateway.teams (
    team_id               text PRIMARY KEY,
    team_alias            text,
    organization_id       text,
    models                text[] NOT NULL DEFAULT '{}',
    -- [{"user_id", "user_email"?, "role": "admin" | "user"}]
    members_with_roles    jsonb NOT NULL DEFAULT '[]'::jsonb,
    max_budget            double precision,
    budget_duration       text,
    tpm_limit             bigint,
    rpm_limit             bigint,
    max_parallel_requests bigint,
    blocked               boolean NOT NULL DEFAULT false,
    metadata              jsonb NOT NULL DEFAULT '{}'::jsonb,
    version               bigint NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS gateway.users (
    user_id               text PRIMARY KEY,
    user_alias            text,
    user_email            text,
    user_role             text,
    organization_id       text,
    models                text[] NOT NULL DEFAULT '{}',
    max_budget            double precision,
    budget_duration       text,
    tpm_limit             bigint,
    rpm_limit             bigint,
    max_parallel_requests bigint,
    blocked               boolean NOT NULL DEFAULT false,
    metadata              jsonb NOT NULL DEFAULT '{}'::jsonb,
    version               bigint NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- End users are matched by the request body's "user" field (LiteLLM's customer id).
CREATE TABLE IF NOT EXISTS gateway.end_users (
    user_id               text PRIMARY KEY,
    alias                 text,
    allowed_model_region  text,
    default_model         text,
    max_budget            double precision,
    budget_duration       text,
    tpm_limit             bigint,
    rpm_limit             bigint,
    max_parallel_requests bigint,
    blocked               boolean NOT NULL DEFAULT false,
    metadata              jsonb NOT NULL DEFAULT '{}'::jsonb,
    version               bigint NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- A virtual key may belong to a team and to an internal user (LiteLLM_VerificationToken).
ALTER TABLE gateway.api_keys ADD COLUMN IF NOT EXISTS team_id text;
ALTER TABLE gateway.api_keys ADD COLUMN IF NOT EXISTS user_id text;
CREATE INDEX IF NOT EXISTS api_keys_team_id_idx ON gateway.api_keys (team_id);
CREATE INDEX IF NOT EXISTS api_keys_user_id_idx ON gateway.api_keys (user_id);

-- Spend logs name the key's user, team and organization and the request's end user (LiteLLM
-- SpendLogs user, team_id, organization_id, end_user); their spend totals live in
-- gateway.key_spend (003) under the tokens "user:<id>", "team:<id>", "organization:<id>" and
-- "end_user:<id>", and their rate limits in gateway.rate_windows / slot_leases likewise.
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS user_id text NOT NULL DEFAULT '';
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS team_id text NOT NULL DEFAULT '';
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS organization_id text NOT NULL DEFAULT '';
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS end_user text NOT NULL DEFAULT '';

-- Attach the registry triggers of 001_registry.sql to a table: one call per registry table.
CREATE OR REPLACE FUNCTION gateway.registry_attach(tbl text, typ text, pk text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS registry_bump_version ON gateway.%I', tbl);
    EXECUTE format('CREATE TRIGGER registry_bump_version BEFORE INSERT OR UPDATE ON gateway.%I
                    FOR EACH ROW EXECUTE FUNCTION gateway.registry_bump_version()', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS registry_log_change ON gateway.%I', tbl);
    EXECUTE format('CREATE TRIGGER registry_log_change AFTER INSERT OR UPDATE OR DELETE ON gateway.%I
                    FOR EACH ROW EXECUTE FUNCTION gateway.registry_log_change(%L, %L)', tbl, typ, pk);
    EXECUTE format('DROP TRIGGER IF EXISTS registry_log_truncate ON gateway.%I', tbl);
    EXECUTE format('CREATE TRIGGER registry_log_truncate AFTER TRUNCATE ON gateway.%I
                    FOR EACH STATEMENT EXECUTE FUNCTION gateway.registry_log_truncate(%L)', tbl, typ);
END $$;

SELECT gateway.registry_attach('organizations', 'organization', 'organization_id');
SELECT gateway.registry_attach('teams', 'team', 'team_id');
SELECT gateway.registry_attach('users', 'user', 'user_id');
SELECT gateway.registry_attach('end_users', 'end_user', 'user_id');
