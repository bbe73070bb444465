-- Budgets as objects (issue 19 item 9): LiteLLM's LiteLLM_BudgetTable, created by /budget/new
-- and linked by budget_id from end users, keys, teams, organizations and team memberships.
-- A registry on the change feed like every other (the triggers of 001_registry.sql through
-- registry_attach of 005): a budget made or changed through one replica (or psql) limits the
-- objects linked to it on every replica at once.
--
-- A budget is a set of limits, not a shared purse: each object linked to it is held to the
-- budget's limits on its own spend and its own rate windows (LiteLLM: an end user's spend is
-- LiteLLM_EndUserTable.spend, checked against its litellm_budget_table.max_budget). The links
-- themselves live in each object's litellm_fields ({"budget_id": "..."}, sql/011), so they
-- travel with the object's own row; a team's member budget id in its litellm_fields
-- ("team_member_budget_id", LiteLLM keeps it in the team's metadata).
--
-- Column names are LiteLLM's. model_max_budget: {"<model group>": {"max_budget"?, "budget_duration"?,
-- "tpm_limit"?, "rpm_limit"?}} as its BudgetNewRequest documents it.
CREATE TABLE IF NOT EXISTS gateway.budgets (
    budget_id             text PRIMARY KEY,
    max_budget            double precision,
    soft_budget           double precision,
    max_parallel_requests bigint,
    tpm_limit             bigint,
    rpm_limit             bigint,
    model_max_budget      jsonb NOT NULL DEFAULT '{}'::jsonb,
    budget_duration       text,
    budget_reset_at       timestamptz,
    created_by            text NOT NULL DEFAULT '',
    updated_by            text NOT NULL DEFAULT '',
    version               bigint NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

SELECT gateway.registry_attach('budgets', 'budget', 'budget_id');
