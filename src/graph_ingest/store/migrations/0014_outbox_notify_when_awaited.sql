-- 0013 woke the relay for every commit of outbox rows: a batch's three commits (admission, graph
-- write, state) then cost three relay passes and three Kafka transactions, where one suffices.
-- At 20 lone plans/s that tripled Kafka's CPU per plan (issue 20). Rows of the stages a later
-- commit of the same journey always follows (PREPARED, GRAPH_APPLIED, STATE_COMMITTED) now wake
-- no one: they leave with the row that ends the journey or takes it elsewhere (COMPLETED,
-- FAILED, PARKED, CONFLICT, DEAD_LETTERED; retry-tier copies, DLQ envelopes and re-published
-- plans carry no stage). A journey cut short by a crash leaves its rows for the relay's idle
-- poll (relay.idle_poll_interval_s) or for recovery's next row.
DROP TRIGGER outbox_notify ON outbox;

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH ROW
    WHEN (coalesce(NEW.headers ->> 'stage', '') NOT IN ('PREPARED', 'GRAPH_APPLIED', 'STATE_COMMITTED'))
    EXECUTE FUNCTION outbox_notify();
