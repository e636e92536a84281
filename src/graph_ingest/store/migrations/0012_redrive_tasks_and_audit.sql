-- Redrive tasks, the audit log and repeat failures (issue 18 item 4): operator actions on the
-- write side, so in the store's own schema.

-- One row per `dlq replay-all` run (a redrive task). Its runner, a thread of the process that
-- started it, updates the counts and heartbeat_at; a cancel from any process sets CANCELLING and
-- the runner ends the task CANCELLED after the entry in hand.
CREATE TABLE redrive_tasks (
    task_id        TEXT PRIMARY KEY,
    dlq_topic      TEXT NOT NULL,
    status         TEXT NOT NULL
        CHECK (status IN ('RUNNING', 'COMPLETED', 'CANCELLING', 'CANCELLED', 'FAILED')),
    filter         JSONB NOT NULL,
    rate           DOUBLE PRECISION,
    started_by     TEXT NOT NULL,
    reason         TEXT,
    to_move        BIGINT NOT NULL,
    moved          BIGINT NOT NULL DEFAULT 0,
    refused        BIGINT NOT NULL DEFAULT 0,
    failed         BIGINT NOT NULL DEFAULT 0,
    -- [{"dlq_id": ..., "reason": ...}], the first refusals only (bounded by the runner)
    refusals       JSONB NOT NULL DEFAULT '[]',
    error          TEXT,
    started_at     TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    ended_at       TIMESTAMPTZ
);

-- One running task per DLQ, enforced here: a second start violates this index, whatever the
-- process. A runner that died leaves its row RUNNING; a start first ends such a row FAILED once
-- its heartbeat is stale (graph_ingest.dlq.tasks), so it never blocks for good.
CREATE UNIQUE INDEX redrive_tasks_one_running_idx ON redrive_tasks (dlq_topic)
    WHERE status IN ('RUNNING', 'CANCELLING');
CREATE INDEX redrive_tasks_started_idx ON redrive_tasks (started_at DESC);

-- Who did what to the DLQ (and to the breakers), when and why. Append only.
CREATE TABLE audit_log (
    audit_id   BIGSERIAL PRIMARY KEY,
    at         TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     JSONB NOT NULL,
    details    JSONB NOT NULL DEFAULT '{}',
    reason     TEXT
);
CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_action_idx ON audit_log (action, at);

-- How often each DLQ entry failed again after a replay. An entry gains attempts only when a
-- replay of it fails again (the applier's routing, the planner's: a dead-lettered operation
-- never retries on its own), so a trigger on the index counts them, whichever path wrote the row.
-- The count lives beside the index, not in it: `dlq reindex` replaces the index rows (delete and
-- insert, no update) and leaves the counts as they were.
CREATE TABLE dlq_repeat_failures (
    dlq_id          TEXT PRIMARY KEY,
    repeat_failures BIGINT NOT NULL,
    last_at         TIMESTAMPTZ NOT NULL
);

CREATE FUNCTION count_dlq_repeat_failure() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO dlq_repeat_failures AS r (dlq_id, repeat_failures, last_at)
    VALUES (NEW.dlq_id, 1, NEW.dead_lettered_at)
    ON CONFLICT (dlq_id) DO UPDATE
        SET repeat_failures = r.repeat_failures + 1, last_at = EXCLUDED.last_at;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER dlq_entries_repeat_failure
    AFTER UPDATE OF attempts ON dlq_entries
    FOR EACH ROW WHEN (NEW.attempts > OLD.attempts)
    EXECUTE FUNCTION count_dlq_repeat_failure();
