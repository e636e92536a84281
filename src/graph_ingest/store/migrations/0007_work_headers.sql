-- 0007: the headers that say whose work an operation is (traceparent, submission_id), kept at its
-- first admission so that every re-send of its frozen plan (resume, recover, release of a parked
-- plan, DLQ replay) carries them: the trace and the submission never lose the operation.
ALTER TABLE operations ADD COLUMN work_headers JSONB NOT NULL DEFAULT '{}';

-- Where the plan was first delivered (its journey's start: the main topic's position, or the one a
-- tier copy's headers name), for the DLQ envelope of a plan that follows its predecessor to the
-- DLQ without a failure or a delivery in hand. NULL for operations admitted before.
ALTER TABLE operations
    ADD COLUMN first_topic      TEXT,
    ADD COLUMN first_partition  INT,
    ADD COLUMN first_offset     BIGINT;
