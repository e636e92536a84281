-- 0005: the planner (issue 7): which operation each ingest request became, and the claim check.

-- One row per submission (the request's operation id, or the id the producer derived from the
-- request: graph_ingest.producers.ingest_producer.submission_id_of), written by the planner in
-- the PostgreSQL transaction that ends just before the Kafka transaction publishing its plan (or
-- its planning DLQ entry) commits. A submission planned again (an aborted Kafka transaction, a
-- byte-identical resubmission) replaces its row. `status` and `submit --wait` read it.
CREATE TABLE ingest_submissions (
    submission_id     TEXT PRIMARY KEY,
    space             TEXT NOT NULL,
    document_id       TEXT NOT NULL,
    -- The plan's operation; null when the request went to the DLQ instead.
    operation_id      TEXT,
    dlq_id            TEXT,
    trace_id          TEXT,
    source_topic      TEXT NOT NULL,
    source_partition  INT NOT NULL,
    source_offset     BIGINT NOT NULL,
    planned_at        TIMESTAMPTZ NOT NULL,
    -- The extraction issues its plan was made with (candidates dropped, model output unusable):
    -- a JSON list of {code, message, chunk_id}, the first 20, messages cut at 300 characters
    -- (graph_ingest.store.base.submission_issues); issue_count counts them all.
    issues            JSONB NOT NULL DEFAULT '[]',
    issue_count       INT NOT NULL DEFAULT 0 CHECK (issue_count >= 0)
);
CREATE INDEX ingest_submissions_operation_idx ON ingest_submissions (operation_id);

-- The claim check: a frozen plan too large for the plans topic. The plan event carries a
-- reference (operation id + fingerprint); the applier reads the bytes here and verifies them as
-- it verifies any plan. Written before the Kafka transaction that publishes the reference
-- commits; first writer wins (the bytes of one (operation, fingerprint) never differ).
CREATE TABLE plan_claims (
    operation_id  TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    plan_bytes    BYTEA NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (operation_id, fingerprint)
);

-- What became of each CONFLICT of a planned operation (issue 7, "versions faster than they
-- apply"): the planner worker re-submits the newest request of the document (REQUESTED), the
-- planner plans it on the committed state (REPLANNED, as `replanned_as`), or finds a newer
-- request of the document meanwhile (SUPERSEDED); past PLANNER__MAX_REPLANS the request becomes
-- a planning DLQ entry instead (DEAD_LETTERED). `attempt` counts the replans of one submission:
-- the operation a replan made carries it on, so its own CONFLICT is attempt + 1. A REQUESTED
-- row never replaces another (a CONFLICT snapshot delivered twice), a SUPERSEDED one only a
-- REQUESTED one.
CREATE TABLE ingest_replans (
    operation_id   TEXT PRIMARY KEY,
    submission_id  TEXT NOT NULL,
    attempt        INT NOT NULL CHECK (attempt >= 1),
    outcome        TEXT NOT NULL
                   CHECK (outcome IN ('REQUESTED', 'REPLANNED', 'SUPERSEDED', 'DEAD_LETTERED')),
    replanned_as   TEXT,
    dlq_id         TEXT,
    at             TIMESTAMPTZ NOT NULL
);
CREATE INDEX ingest_replans_replanned_as_idx ON ingest_replans (replanned_as);
-- The newest submission of a document (the one a CONFLICT replans).
CREATE INDEX ingest_submissions_document_idx
    ON ingest_submissions (space, document_id, source_offset DESC);
