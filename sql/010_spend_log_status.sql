-- A spend log's outcome, as LiteLLM's SpendLogs.status: 'success', or 'failure' for a call
-- that failed after it was admitted (an upstream error after the retries and fallbacks of its
-- model group, a mock hook's failure, a post_call guardrail block, a client gone). Rows
-- written before this migration were successes or failures alike; they read 'success'.
-- Numbered 010: 009 is replica_status.
ALTER TABLE gateway.spend_logs
    ADD COLUMN IF NOT EXISTS status text NOT NULL DEFAULT 'success';
