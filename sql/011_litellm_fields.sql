-- LiteLLM request fields that lockstep keeps without a column of their own (issue 19 item 1,
-- API.md "Compatibility policy"; the list is pkg/catalogue): informational ones (tags,
-- user_name, send_invite_email, soft_budget, ...) are stored and returned, and a few honoured
-- ones live here too (a key's aliases, a team's model_aliases), read by the row builders on
-- every replica. A jsonb object, merged (||) by updates: {"aliases": {...}, "tags": [...]}.
--
-- Organization members (LiteLLM's LiteLLM_OrganizationMembership rows, issue 19 item 6):
-- [{"user_id", "user_email"?, "user_role"}] on the organization's own row, so a member added
-- through one replica is listed by every other at once (the change feed carries the row).
-- Numbered 011: 009 is replica_status, 010 spend_log_status.
ALTER TABLE gateway.api_keys      ADD COLUMN IF NOT EXISTS litellm_fields jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE gateway.teams         ADD COLUMN IF NOT EXISTS litellm_fields jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE gateway.users         ADD COLUMN IF NOT EXISTS litellm_fields jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE gateway.organizations ADD COLUMN IF NOT EXISTS litellm_fields jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE gateway.end_users     ADD COLUMN IF NOT EXISTS litellm_fields jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE gateway.organizations ADD COLUMN IF NOT EXISTS members jsonb NOT NULL DEFAULT '[]'::jsonb;
