-- 0004: what a document's state was planned with (issue 7, the planner's version diff).
-- The planner compares a request with the committed state: the same content, document version,
-- graph schema version and extraction fingerprint is a NO_OP without calling the extractor; a
-- request older than the source update time the state holds is out of order. NULL for states
-- committed before (hand-written plans): they never compare equal, so they re-extract once.
ALTER TABLE document_states
    ADD COLUMN schema_version          TEXT,
    ADD COLUMN extraction_fingerprint  TEXT,
    ADD COLUMN source_updated_at       TIMESTAMPTZ;

-- "Does another document still list this edge / node?" (the planner's stale-edge deletes and
-- retractions, reconcile): containment (@>) on the listed keys, answered by an index.
CREATE INDEX document_states_edge_keys_idx ON document_states USING gin (edge_keys jsonb_path_ops);
CREATE INDEX document_states_node_ids_idx ON document_states USING gin (node_ids jsonb_path_ops);
