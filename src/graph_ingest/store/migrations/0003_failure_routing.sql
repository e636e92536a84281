-- 0003: failure routing (issue 6, DESIGN.md §5): every routed failure, and the DLQ index.
-- rejected_messages is superseded by the DLQ, which keeps the raw bytes of what it holds.
DROP TABLE rejected_messages;

-- One row per failure the applier routed to a retry tier or the DLQ, written in the transaction
-- that writes the tier or DLQ message to the outbox. The source position makes routing exactly
-- once: a message redelivered after a crash (its offset not yet committed) finds its row and is
-- not routed again. A plan that followed its predecessor to the DLQ was not consumed when it
-- went there: its source is null (NULLs never collide in a unique index).
CREATE TABLE failure_attempts (
    id                BIGSERIAL PRIMARY KEY,
    source_topic      TEXT,
    source_partition  INT,
    source_offset     BIGINT,
    -- Null when the message names no operation it owns (undecodable, or bound to another plan).
    operation_id      TEXT,
    attempt           INT NOT NULL CHECK (attempt >= 1),
    tier              INT CHECK (tier >= 0),
    routed_to         TEXT NOT NULL,
    at                TIMESTAMPTZ NOT NULL,
    detail            JSONB NOT NULL
);
CREATE UNIQUE INDEX failure_attempts_source_idx
    ON failure_attempts (source_topic, source_partition, source_offset);
CREATE INDEX failure_attempts_operation_idx ON failure_attempts (operation_id, attempt);

-- The DLQ index: one row per entry, the newest envelope of its key on the DLQ topic, so that
-- `graph-ingest dlq reindex` rebuilds exactly these rows from the topic. Every column but
-- dlq_id and envelope is derived from the envelope (graph_ingest.dlq.entries.entry_of).
CREATE TABLE dlq_entries (
    dlq_id              TEXT PRIMARY KEY,
    status              TEXT NOT NULL,
    operation_id        TEXT,
    fingerprint         TEXT,
    space               TEXT,
    document_id         TEXT,
    code                TEXT NOT NULL,
    error_class         TEXT NOT NULL,
    message             TEXT NOT NULL,
    parked_behind       TEXT,
    original_topic      TEXT NOT NULL,
    original_partition  INT,
    original_offset     BIGINT,
    attempts            INT NOT NULL CHECK (attempts >= 1),
    dead_lettered_at    TIMESTAMPTZ NOT NULL,
    envelope            BYTEA NOT NULL
);
CREATE INDEX dlq_entries_status_idx ON dlq_entries (status, dead_lettered_at);
CREATE INDEX dlq_entries_operation_idx ON dlq_entries (operation_id);
CREATE INDEX dlq_entries_document_idx ON dlq_entries (space, document_id);
CREATE INDEX dlq_entries_parked_behind_idx ON dlq_entries (parked_behind)
    WHERE parked_behind IS NOT NULL;
