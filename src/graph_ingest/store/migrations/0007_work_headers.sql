-- 0007: the headers that say whose work an operation is (traceparent, submission_id), kept at its
-- first admission so that every re-send of its frozen plan (resume, recover, release of a parked
-- plan, DLQ replay) carries them: the trace and the submission never lose the operation.
ALTER TABLE operations ADD COLUMN work_headers JSONB NOT NULL DEFAULT '{}';
