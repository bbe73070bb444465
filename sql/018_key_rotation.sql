-- Scheduled key rotation (issue 19; LiteLLM's auto_rotate / rotation_interval and its
-- KeyRotationManager): a key's auto_rotate, rotation_interval, key_rotation_at,
-- last_rotation_at and rotation_count live in its litellm_fields (sql/011), so they travel
-- with the key's row on the change feed like every other LiteLLM field; no new column, no
-- trigger change. The rotation job (one replica at a time, under an advisory lock) reads the
-- due keys through this partial index: only the keys that rotate are in it, ordered by
-- key_rotation_at (text in store.RotationTimeLayout, fixed width UTC, so text order is time
-- order). Numbered 018: 014-017 are other work's.
CREATE INDEX IF NOT EXISTS api_keys_rotation_due_idx
    ON gateway.api_keys ((litellm_fields->>'key_rotation_at'))
    WHERE litellm_fields->>'auto_rotate' = 'true';
