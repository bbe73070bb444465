-- gateway.a2a_tasks records who created each task (issue 17): tasks/get and tasks/cancel answer
-- only the creating key (owner_token, the sha256 hex of the virtual key; '' for the master key
-- or no authentication), a key of the same team (owner_team, '' for none), or the master key.
-- Anyone else gets the task-not-found error an unknown id gets. Rows written before this
-- migration have '' for both, so only the master key (or an unauthenticated gateway) sees them.
ALTER TABLE gateway.a2a_tasks ADD COLUMN IF NOT EXISTS owner_token text NOT NULL DEFAULT '';
ALTER TABLE gateway.a2a_tasks ADD COLUMN IF NOT EXISTS owner_team text NOT NULL DEFAULT '';
