-- Operation event v2 (issue 18): what the read model must know of an operation.
-- Write side: the fields operation.v2 added (plan kind, submission, retry tier, parked-behind,
-- outage waits, the last error's error id and trace id) in one JSONB column, so that every
-- snapshot the applier builds from a stored operation carries them on. Absent keys are the
-- fields' defaults; rows written before this migration read as operation.v1 events do.
ALTER TABLE operations ADD COLUMN details JSONB NOT NULL DEFAULT '{}';

DO $migration$
DECLARE
    read_schema text := current_schema() || '_read';
BEGIN
    -- Read side: the outage waits ([{dependency, started_at, ended_at}]); the other v2 fields
    -- have their columns since 0008, retry_tier now as the tier's index (it was only ever NULL). "transitions" entries gain "error" (null or {code,
    -- error_class, message, error_id, trace_id}) without a change of column.
    EXECUTE format(
        $sql$ALTER TABLE %I.operation_status ADD COLUMN waits JSONB NOT NULL DEFAULT '[]'$sql$,
        read_schema);
    EXECUTE format(
        'ALTER TABLE %I.operation_status ALTER COLUMN retry_tier TYPE INT USING retry_tier::int',
        read_schema);
END
$migration$;
