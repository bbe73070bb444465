-- The publication the logical-replication change source streams (`--sync-source logical`,
-- DESIGN.md "A second change source, logical replication"). Each replica decodes it with
-- pgoutput on its own TEMPORARY slot (PostgreSQL docs 31.1 "Publication", 55.5 "Logical
-- Streaming Replication Protocol").
--
-- Only the change log is published: its rows are the stream, exactly what the triggers of
-- 001_registry.sql write, so the logical source needs neither pg_notify nor the registry tables
-- themselves. Only INSERTs are published: the change log is append-only except for pruning,
-- and a prune's DELETEs are of no interest to any replica.
--
-- Idempotent: CREATE PUBLICATION has no IF NOT EXISTS, so check pg_publication first.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'gateway_registry_pub') THEN
        CREATE PUBLICATION gateway_registry_pub FOR TABLE gateway.registry_changes
            WITH (publish = 'insert');
    END IF;
END $$;
