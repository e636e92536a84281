-- migrate: outside a transaction
-- The large values the pipeline writes (a plan's frozen bytes, its document's node and edge
-- lists, the history's full state, the plan copies and envelopes in the outbox and the DLQ) are
-- compressed with lz4 instead of PostgreSQL's default, pglz: a large plan costs PostgreSQL ~14 %
-- less CPU, a small one ~5 %, for ~17 % more bytes in these columns (docs/performance.md,
-- "Thirteenth round"). Values written before keep pglz and stay readable.
-- SET COMPRESSION changes only the catalog, but takes its table's ACCESS EXCLUSIVE lock for that
-- instant: it waits for the transactions in progress on the table (at most the session's
-- lock_timeout) and the workers' writes to the table wait behind it. Outside a transaction, each
-- table's lock ends with its own statement. A server built without lz4 keeps pglz, and migrate
-- logs the WARNING.
CREATE OR REPLACE FUNCTION pg_temp.compress_with_lz4(target regclass, VARIADIC columns text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format(
        'ALTER TABLE %s %s',
        target,
        (SELECT string_agg(format('ALTER COLUMN %I SET COMPRESSION lz4', c), ', ')
         FROM unnest(columns) AS c)
    );
EXCEPTION WHEN feature_not_supported THEN
    RAISE WARNING '%: this PostgreSQL server has no lz4; its values stay compressed with pglz',
        target;
END
$$;
SELECT pg_temp.compress_with_lz4('operations', 'plan_bytes');
SELECT pg_temp.compress_with_lz4('plan_claims', 'plan_bytes');
SELECT pg_temp.compress_with_lz4(
    'document_states', 'node_ids', 'edge_keys', 'superseded_edge_keys', 'kept_edge_keys'
);
SELECT pg_temp.compress_with_lz4('document_history', 'state');
SELECT pg_temp.compress_with_lz4('outbox', 'message_value');
SELECT pg_temp.compress_with_lz4('dlq_entries', 'envelope');
