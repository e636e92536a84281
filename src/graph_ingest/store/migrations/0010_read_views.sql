-- The read side's other tables (issue 18): DLQ entries, worker degradation and one row per
-- document, in the read schema "<store schema>_read" beside operation_status (0008), so a
-- rebuild copies them with the rest. Only the projector folds into them.
DO $migration$
DECLARE
    read_schema text := current_schema() || '_read';
BEGIN
    -- The newest envelope of each DLQ entry (topic ingestion.plans.dlq, keyed by DLQ id). A key's
    -- envelopes share a partition, so the Kafka offset orders them: an envelope at a lower
    -- offset never overwrites one at a higher ("topic", "partition", "offset": where the folded
    -- envelope is). is_request: a planning DLQ entry (an ingest request that was never planned:
    -- its original topic is the requests topic), shown as a request, not as a plan.
    EXECUTE format($sql$
        CREATE TABLE %I.dlq_entries (
            dlq_id             TEXT PRIMARY KEY,
            status             TEXT NOT NULL,
            is_request         BOOLEAN NOT NULL,
            operation_id       TEXT,
            fingerprint        TEXT,
            submission_id      TEXT,
            space              TEXT,
            document_id        TEXT,
            code               TEXT NOT NULL,
            error_class        TEXT NOT NULL,
            message            TEXT NOT NULL,
            trace_id           TEXT NOT NULL,
            attempts           BIGINT NOT NULL,
            parked_behind      TEXT,
            note               TEXT,
            original_topic     TEXT NOT NULL,
            original_partition INT,
            original_offset    BIGINT,
            dead_lettered_at   TIMESTAMPTZ NOT NULL,
            topic              TEXT NOT NULL,
            partition          INT NOT NULL,
            "offset"           BIGINT NOT NULL,
            envelope           BYTEA NOT NULL
        )$sql$, read_schema);
    -- list_dlq_entries pages oldest first by (dead_lettered_at, dlq_id), filtered or not.
    EXECUTE format('CREATE INDEX ON %I.dlq_entries (dead_lettered_at, dlq_id)', read_schema);
    EXECUTE format('CREATE INDEX ON %I.dlq_entries (status, dead_lettered_at, dlq_id)',
                   read_schema);

    -- One row per worker: its newest degradation event (ingestion.degradation, keyed by worker
    -- id; the offset orders a worker's events as above). since: when it entered the level (the
    -- event's own time); last_event_at: the message's Kafka timestamp.
    EXECUTE format($sql$
        CREATE TABLE %I.worker_degradation (
            worker_id      TEXT PRIMARY KEY,
            level          TEXT NOT NULL,
            previous_level TEXT NOT NULL,
            reason         TEXT NOT NULL,
            breakers       JSONB NOT NULL DEFAULT '{}',
            since          TIMESTAMPTZ NOT NULL,
            last_event_at  TIMESTAMPTZ,
            topic          TEXT NOT NULL,
            partition      INT NOT NULL,
            "offset"       BIGINT NOT NULL
        )$sql$, read_schema);

    -- One row per document, folded from the operation events: every operation of the
    -- document ("operations": [{operation_id, expected_revision, stage, sequence, plan_kind,
    -- created_at, updated_at}] in creation order, each its newest snapshot) and what the last
    -- COMPLETED state-changing operation made it (revision, operation_id, completed_at; revision
    -- 0 and NULLs while none has completed).
    EXECUTE format($sql$
        CREATE TABLE %I.documents (
            space        TEXT NOT NULL,
            document_id  TEXT NOT NULL,
            revision     BIGINT NOT NULL,
            operation_id TEXT,
            completed_at TIMESTAMPTZ,
            operations   JSONB NOT NULL DEFAULT '[]',
            updated_at   TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (space, document_id)
        )$sql$, read_schema);
END
$migration$;
