-- 0001: the bookkeeping of the apply algorithm (DESIGN.md §4).
-- Runs with search_path set to the target schema; every name here is unqualified.

-- One row per operation_id, created with its frozen plan by the first writer. The identity columns
-- and the plan never change afterwards (the trigger below refuses it); the rest is the latest
-- snapshot, advanced by optimistic sequence compare-and-set.
CREATE TABLE operations (
    operation_id        TEXT PRIMARY KEY,
    space               TEXT NOT NULL,
    document_id         TEXT NOT NULL,
    expected_revision   INT NOT NULL CHECK (expected_revision >= 0),
    fingerprint         TEXT NOT NULL,
    plan_bytes          BYTEA NOT NULL,
    stage               TEXT NOT NULL,
    sequence            INT NOT NULL CHECK (sequence >= 1),
    attempts            INT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error_code     TEXT,
    last_error_class    TEXT,
    last_error_message  TEXT,
    stage_times         JSONB NOT NULL DEFAULT '{}',
    next_retry_at       TIMESTAMPTZ,
    dlq_id              TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL
);
-- Parked lookups: operations waiting for a document to reach a revision.
CREATE INDEX operations_document_idx ON operations (space, document_id, expected_revision);
-- Recovery scans: non-terminal operations, oldest first.
CREATE INDEX operations_stage_updated_idx ON operations (stage, updated_at);

CREATE FUNCTION operations_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.operation_id IS DISTINCT FROM OLD.operation_id
       OR NEW.space IS DISTINCT FROM OLD.space
       OR NEW.document_id IS DISTINCT FROM OLD.document_id
       OR NEW.expected_revision IS DISTINCT FROM OLD.expected_revision
       OR NEW.fingerprint IS DISTINCT FROM OLD.fingerprint
       OR NEW.plan_bytes IS DISTINCT FROM OLD.plan_bytes THEN
        RAISE EXCEPTION 'operation % is bound to its frozen plan; identity and plan never change',
            OLD.operation_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
-- Fires only when an UPDATE names one of these columns; stage updates never pay for it.
CREATE TRIGGER operations_frozen
    BEFORE UPDATE OF operation_id, space, document_id, expected_revision, fingerprint, plan_bytes
    ON operations
    FOR EACH ROW EXECUTE FUNCTION operations_frozen();

-- The committed state of each document: advanced only by revision compare-and-set.
CREATE TABLE document_states (
    space                 TEXT NOT NULL,
    document_id           TEXT NOT NULL,
    revision              INT NOT NULL CHECK (revision >= 1),
    operation_id          TEXT NOT NULL,
    content_hash          TEXT NOT NULL,
    document_version      TEXT NOT NULL,
    node_ids              JSONB NOT NULL DEFAULT '[]',
    edge_keys             JSONB NOT NULL DEFAULT '[]',
    superseded_edge_keys  JSONB NOT NULL DEFAULT '[]',
    committed_at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (space, document_id)
);
CREATE INDEX document_states_operation_idx ON document_states (operation_id);

-- Every committed revision, with the full state (fact sources included) as JSON.
CREATE TABLE document_history (
    space         TEXT NOT NULL,
    document_id   TEXT NOT NULL,
    revision      INT NOT NULL,
    operation_id  TEXT NOT NULL,
    state         JSONB NOT NULL,
    committed_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (space, document_id, revision)
);

-- (space, entity_type, normalized_name) -> node_id. A node keeps one entity type per space (the
-- store checks that under an advisory lock per node); it may carry several names of that type.
CREATE TABLE entity_registry (
    space            TEXT NOT NULL,
    entity_type      TEXT NOT NULL,
    normalized_name  TEXT NOT NULL,
    name             TEXT NOT NULL,
    node_id          TEXT NOT NULL,
    aliases          TEXT[] NOT NULL DEFAULT '{}',
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (space, entity_type, normalized_name)
);
CREATE INDEX entity_registry_node_idx ON entity_registry (space, node_id);

-- The facts each document's current state supports; replaced with every committed revision.
-- ordinal keeps the order of DocumentState.fact_sources so the state round-trips exactly.
CREATE TABLE fact_sources (
    space         TEXT NOT NULL,
    document_id   TEXT NOT NULL,
    fact_id       TEXT NOT NULL,
    kind          TEXT NOT NULL,
    evidence      JSONB NOT NULL DEFAULT '[]',
    operation_id  TEXT NOT NULL,
    ordinal       INT NOT NULL DEFAULT 0,
    PRIMARY KEY (space, document_id, fact_id)
);
-- "Which documents still support this fact?" (retractions, reconcile).
CREATE INDEX fact_sources_fact_idx ON fact_sources (space, fact_id);

-- Transactional outbox, drained by the relay in id order. Shape shared with producers/relay.
CREATE TABLE outbox (
    id             BIGSERIAL PRIMARY KEY,
    topic          TEXT NOT NULL,
    message_key    BYTEA,
    message_value  BYTEA NOT NULL,
    headers        JSONB NOT NULL DEFAULT '{}',
    operation_id   TEXT,
    sequence       INT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    published_at   TIMESTAMPTZ
);
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;

-- Messages that can never apply, kept with their raw bytes; one row per source position.
CREATE TABLE rejected_messages (
    id             BIGSERIAL PRIMARY KEY,
    topic          TEXT NOT NULL,
    partition      INT NOT NULL,
    "offset"       BIGINT NOT NULL,
    message_key    BYTEA,
    message_value  BYTEA,
    code           TEXT NOT NULL,
    error_class    TEXT NOT NULL,
    message        TEXT NOT NULL,
    operation_id   TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (topic, partition, "offset")
);
CREATE INDEX rejected_messages_operation_idx ON rejected_messages (operation_id);
