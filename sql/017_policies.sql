-- Guardrail policies as objects (issue 19, LiteLLM's LiteLLM_PolicyTable and its /policies
-- routes, litellm/proxy/policy_engine/): a named set of guardrails — guardrails_add minus
-- guardrails_remove, after those of the policy it inherits — that keys and teams attach by
-- name in their litellm_fields ({"policies": ["<policy_name>", ...]}, sql/011), LiteLLM's key
-- and team metadata "policies". A registry on the change feed like every other (the triggers
-- of 001_registry.sql through registry_attach of 005): a policy made or changed through one
-- replica (or psql) makes its guardrails run on the calls of the keys and teams attaching it,
-- on every replica at once.
--
-- Column names are LiteLLM's. condition: {"model": "<exact or regex>" | ["<exact or regex>",
-- ...]} (its PolicyCondition); null: always. policy_name is unique (LiteLLM's @unique).
CREATE TABLE IF NOT EXISTS gateway.policies (
    policy_id         text PRIMARY KEY,
    policy_name       text NOT NULL UNIQUE,
    inherit           text,
    description       text,
    guardrails_add    text[] NOT NULL DEFAULT '{}',
    guardrails_remove text[] NOT NULL DEFAULT '{}',
    condition         jsonb,
    created_by        text NOT NULL DEFAULT '',
    updated_by        text NOT NULL DEFAULT '',
    version           bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

SELECT gateway.registry_attach('policies', 'policy', 'policy_id');
