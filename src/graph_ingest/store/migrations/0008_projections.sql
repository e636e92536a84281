-- The read side (issue 18): read tables in a schema of their own, "<store schema>_read", which
-- the write side never writes. Only the projector folds into them (graph_ingest.projections).
-- Migrations run with search_path set to the store's schema, so current_schema() names it; the
-- tables live in the sibling schema so a rebuild can swap schemas without touching the store.
DO $migration$
DECLARE
    read_schema text := current_schema() || '_read';
BEGIN
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', read_schema);

    -- One row per operation: its newest snapshot (an older or equal sequence never overwrites)
    -- and every snapshot seen as a step of its history, each with its own time ("transitions":
    -- [{sequence, stage, at, attempts}] in sequence order), so FAILED -> PREPARED ->
    -- DEAD_LETTERED keeps both PREPAREDs. Columns the operation event does not carry yet
    -- (error id, trace id, tier, parked-behind, submission, plan kind) are NULL until a fold of
    -- the topics that do (the DLQ, the requests) fills them.
    EXECUTE format($sql$
        CREATE TABLE %I.operation_status (
            operation_id      TEXT PRIMARY KEY,
            space             TEXT NOT NULL,
            document_id       TEXT NOT NULL,
            expected_revision BIGINT NOT NULL,
            fingerprint       TEXT NOT NULL,
            stage             TEXT NOT NULL,
            sequence          BIGINT NOT NULL,
            attempts          BIGINT NOT NULL,
            error_code        TEXT,
            error_class       TEXT,
            error_message     TEXT,
            error_id          TEXT,
            trace_id          TEXT,
            retry_tier        TEXT,
            next_retry_at     TIMESTAMPTZ,
            dlq_id            TEXT,
            parked_behind     TEXT,
            submission_id     TEXT,
            plan_kind         TEXT,
            transitions       JSONB NOT NULL DEFAULT '[]',
            created_at        TIMESTAMPTZ NOT NULL,
            updated_at        TIMESTAMPTZ NOT NULL
        )$sql$, read_schema);
    -- list_operations pages newest first by (updated_at, operation_id), filtered or not.
    EXECUTE format('CREATE INDEX ON %I.operation_status (updated_at DESC, operation_id DESC)',
                   read_schema);
    EXECUTE format('CREATE INDEX ON %I.operation_status (stage, updated_at DESC, operation_id DESC)',
                   read_schema);
    EXECUTE format('CREATE INDEX ON %I.operation_status (space, document_id)', read_schema);
    EXECUTE format('CREATE INDEX ON %I.operation_status (error_code) WHERE error_code IS NOT NULL',
                   read_schema);

    -- Where each projection has folded up to, written in the transaction of its folds: the
    -- truth a projector seeks to on assignment (Kafka's committed offsets only follow it).
    -- event_at: the Kafka timestamp of the message at "offset"; updated_at: when "offset" last
    -- moved (lag: the age of the last event, and whether a projection is stalled).
    EXECUTE format($sql$
        CREATE TABLE %I.tracking_positions (
            projection  TEXT NOT NULL,
            topic       TEXT NOT NULL,
            partition   INT NOT NULL,
            "offset"    BIGINT NOT NULL,
            event_at    TIMESTAMPTZ,
            updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (projection, topic, partition)
        )$sql$, read_schema);
END
$migration$;
