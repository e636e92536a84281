-- The relay wakes when outbox rows are committed instead of waiting out its poll interval
-- (issue 20): every statement that inserts rows notifies, whichever process runs it (appliers,
-- planners' DLQ routes, operators' replays). PostgreSQL folds the notifications of one
-- transaction with the same channel and payload into one and delivers it at commit, so a batch
-- costs one. The payload is the schema: a relay ignores the other schemas on the same server.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('graph_ingest_outbox', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
