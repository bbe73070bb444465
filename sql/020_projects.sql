-- Projects as objects (issue 19, LiteLLM's LiteLLM_ProjectTable and its /project/* routes,
-- litellm/proxy/management_endpoints/project_endpoints.py): a project sits between a team and
-- its keys ("Organizations > Teams > Projects > Keys", LiteLLM docs project_management.md). A
-- key links one by project_id, kept in the key's litellm_fields ({"project_id": "..."},
-- sql/011). A registry on the change feed like every other (the triggers of 001_registry.sql
-- through registry_attach of 005): a project made or changed through one replica (or psql)
-- gates the calls of its keys on every replica at once — its models, blocked, and the limits of
-- the budget it links (budget_id, a gateway.budgets row, sql/012: max_budget on the project's
-- own spend, tpm_limit / rpm_limit / max_parallel_requests in its own windows, kept under the
-- key_spend and lease token "project:<project_id>"), and its per-model model_rpm_limit /
-- model_tpm_limit.
--
-- Column names are LiteLLM's. model_rpm_limit / model_tpm_limit: {"<model group>": n}.
-- metadata holds tags as LiteLLM's project metadata does.
CREATE TABLE IF NOT EXISTS gateway.projects (
    project_id      text PRIMARY KEY,
    project_alias   text,
    description     text,
    team_id         text,
    budget_id       text,
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
    models          text[] NOT NULL DEFAULT '{}',
    model_rpm_limit jsonb NOT NULL DEFAULT '{}'::jsonb,
    model_tpm_limit jsonb NOT NULL DEFAULT '{}'::jsonb,
    blocked         boolean NOT NULL DEFAULT false,
    created_by      text NOT NULL DEFAULT '',
    updated_by      text NOT NULL DEFAULT '',
    version         bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

SELECT gateway.registry_attach('projects', 'project', 'project_id');

-- A spend log names the key's project (LiteLLM metadata user_api_key_project_id, shown by
-- /spend/logs); rows written before this migration have ''.
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS project_id text NOT NULL DEFAULT '';
