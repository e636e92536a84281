-- 0006: what a document's state was planned on, and the edges the KEEP policy kept (issue 16).
-- base_operation_id: the operation whose committed state this one was planned on; the state
-- compare-and-set requires it to be the committed one (DESIGN.md §7a), so a plan of another
-- lineage can never commit on top of this one. NULL for revision 1 and for states committed before.
-- kept_edge_keys: edges a revision no longer lists but kept (KEEP stale-relation policy): still
-- the document's, so reconcile expects them and other documents' deletes leave them alone.
ALTER TABLE document_states
    ADD COLUMN base_operation_id  TEXT,
    ADD COLUMN kept_edge_keys     JSONB NOT NULL DEFAULT '[]'::jsonb;

CREATE INDEX document_states_kept_edge_keys_idx
    ON document_states USING gin (kept_edge_keys jsonb_path_ops);
