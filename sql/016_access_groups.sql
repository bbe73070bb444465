-- LiteLLM's unified access groups (LiteLLM_AccessGroupTable; issue 19): a named set of model
-- names, MCP server ids and agent ids, created by POST /v1/access_group and attached to keys
-- and teams by id (their access_group_ids). A registry on the change feed like every other
-- (the triggers of 001_registry.sql through registry_attach of 005): a group made or changed
-- through one replica (or psql) grants and narrows access on every replica at once.
--
-- The attachments live on the keys and teams, in their litellm_fields ({"access_group_ids":
-- [...]}, sql/011), so they travel with the key's or team's own row; a group's
-- assigned_key_ids / assigned_team_ids are answered from them, not stored here twice.
--
-- This is not lockstep's older "access group" (a model-group name in a key's models and in
-- deployments' model_info.access_groups, routes /access_group/*): that one has no row.
-- Column names are LiteLLM's. Numbered 016: 014 and 015 belong to other changes.
CREATE TABLE IF NOT EXISTS gateway.access_groups (
    access_group_id       text PRIMARY KEY,
    access_group_name     text NOT NULL UNIQUE,
    description           text,
    access_model_names    jsonb NOT NULL DEFAULT '[]'::jsonb,
    access_mcp_server_ids jsonb NOT NULL DEFAULT '[]'::jsonb,
    access_agent_ids      jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_by            text NOT NULL DEFAULT '',
    updated_by            text NOT NULL DEFAULT '',
    version               bigint NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

SELECT gateway.registry_attach('access_groups', 'access_group', 'access_group_id');
