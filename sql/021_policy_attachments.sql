-- Guardrail policy attachments (issue 19, LiteLLM's LiteLLM_PolicyAttachmentTable and its
-- /policies/attachments routes, litellm/proxy/policy_engine/attachment_registry.py): where a
-- policy (sql/017) applies besides the keys and teams naming it in their "policies" — every
-- call (scope "*"), or the calls whose team alias, key alias, model and request tags match
-- the attachment's teams, keys, models and tags patterns ("*" everything, "prefix-*" a
-- prefix, else the exact value). A registry on the change feed like every other (the
-- triggers of 001_registry.sql through registry_attach of 005): an attachment made or
-- removed through one replica (or psql) changes which guardrails run on every replica at once.
--
-- Column names are LiteLLM's. policy_name names a gateway.policies row; the admin refuses a
-- missing one and refuses to delete or rename a policy that an attachment names (a call
-- never runs without a guardrail an attachment says it must run).
CREATE TABLE IF NOT EXISTS gateway.policy_attachments (
    attachment_id text PRIMARY KEY,
    policy_name   text NOT NULL,
    scope         text,
    teams         text[] NOT NULL DEFAULT '{}',
    keys          text[] NOT NULL DEFAULT '{}',
    models        text[] NOT NULL DEFAULT '{}',
    tags          text[] NOT NULL DEFAULT '{}',
    created_by    text NOT NULL DEFAULT '',
    updated_by    text NOT NULL DEFAULT '',
    version       bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS policy_attachments_policy_name ON gateway.policy_attachments (policy_name);

SELECT gateway.registry_attach('policy_attachments', 'policy_attachment', 'attachment_id');
