-- What LiteLLM's SpendLogs keep of each call beyond lockstep's columns (issue 19 item 10):
-- response_id is the answer's "id" the client saw (chatcmpl-…, msg_…, resp_…), which LiteLLM
-- logs as request_id; lockstep keeps its own call id as the primary key (a retried flush
-- counts nothing twice, whatever ids an upstream repeats) and answers request_id with the
-- response id when there is one. key_alias and team_alias are the key's and its team's
-- aliases at the time of the call (LiteLLM metadata user_api_key_alias,
-- user_api_key_team_alias). request_tags are the request's metadata.tags (LiteLLM
-- SpendLogs.request_tags, read by its /global/spend/tags). Rows written before this migration
-- have '' and [] (request_id is then the call id, as before).
-- Numbered 013: 012 is another change of this release.
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS response_id text NOT NULL DEFAULT '';
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS key_alias text NOT NULL DEFAULT '';
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS team_alias text NOT NULL DEFAULT '';
ALTER TABLE gateway.spend_logs ADD COLUMN IF NOT EXISTS request_tags jsonb NOT NULL DEFAULT '[]'::jsonb;
CREATE INDEX IF NOT EXISTS spend_logs_response_id_idx ON gateway.spend_logs (response_id) WHERE response_id <> '';
