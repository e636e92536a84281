"""The SQL of the documents port: states by compare-and-set, history, fact sources, claims."""

from __future__ import annotations

from graph_ingest.store.postgres.fragments import (
    OPERATION_COLUMNS_OF_O,
    advisory_xact_locks,
)

# Serialises the apply steps of one document (parking, fencing the graph write, committing).
LOCK_DOCUMENTS = advisory_xact_locks("document")


DOCUMENT_REVISIONS = """
SELECT d.space, d.document_id, d.revision, d.operation_id
FROM document_states AS d
JOIN unnest(%(space)b::text[], %(document_id)b::text[]) AS k(space, document_id)
  ON d.space = k.space AND d.document_id = k.document_id
"""


# Revision compare-and-set (insert for revision 1, update from revision - 1 otherwise), then for
# the documents it moved: the history row and the removal of their old fact sources.
COMMIT_DOCUMENT_STATES = """
WITH incoming AS (
    SELECT *
    FROM json_to_recordset(%(states)s::json) AS n(
        space text, document_id text, revision int, operation_id text, content_hash text,
        document_version text, base_operation_id text, schema_version text,
        extraction_fingerprint text, source_updated_at timestamptz, committed_at timestamptz,
        state jsonb
    )
), created AS (
    INSERT INTO document_states (
        space, document_id, revision, operation_id, content_hash, document_version, node_ids,
        edge_keys, superseded_edge_keys, kept_edge_keys, base_operation_id, schema_version,
        extraction_fingerprint, source_updated_at, committed_at
    )
    SELECT space, document_id, revision, operation_id, content_hash, document_version,
           state->'node_ids', state->'edge_keys', state->'superseded_edge_keys',
           state->'kept_edge_keys', base_operation_id, schema_version, extraction_fingerprint,
           source_updated_at, committed_at
    FROM incoming
    WHERE revision = 1 AND base_operation_id IS NULL
    ON CONFLICT (space, document_id) DO NOTHING
    RETURNING space, document_id
), advanced AS (
    UPDATE document_states AS d
    SET revision = n.revision,
        operation_id = n.operation_id,
        content_hash = n.content_hash,
        document_version = n.document_version,
        node_ids = n.state->'node_ids',
        edge_keys = n.state->'edge_keys',
        superseded_edge_keys = n.state->'superseded_edge_keys',
        kept_edge_keys = n.state->'kept_edge_keys',
        base_operation_id = n.base_operation_id,
        schema_version = n.schema_version,
        extraction_fingerprint = n.extraction_fingerprint,
        source_updated_at = n.source_updated_at,
        committed_at = n.committed_at
    FROM incoming AS n
    WHERE n.revision > 1
      AND d.space = n.space AND d.document_id = n.document_id AND d.revision = n.revision - 1
      -- the lineage: the state must be exactly the one the plan was planned on (DESIGN.md §7a)
      AND d.operation_id = n.base_operation_id
    RETURNING d.space, d.document_id
), committed AS (
    SELECT space, document_id FROM created
    UNION ALL
    SELECT space, document_id FROM advanced
), history AS (
    INSERT INTO document_history (space, document_id, revision, operation_id, state, committed_at)
    SELECT n.space, n.document_id, n.revision, n.operation_id, n.state, n.committed_at
    FROM incoming AS n JOIN committed USING (space, document_id)
    ON CONFLICT (space, document_id, revision) DO NOTHING
), old_facts AS (
    DELETE FROM fact_sources AS f
    USING committed AS c
    WHERE f.space = c.space AND f.document_id = c.document_id
)
SELECT space, document_id FROM committed
"""


INSERT_FACT_SOURCES = """
INSERT INTO fact_sources (space, document_id, fact_id, kind, evidence, operation_id, ordinal)
SELECT space, document_id, fact_id, kind, evidence::jsonb, operation_id, ordinal
FROM unnest(
    %(space)b::text[], %(document_id)b::text[], %(fact_id)b::text[], %(kind)b::text[],
    %(evidence)b::text[], %(operation_id)b::text[], %(ordinal)b::int[]
) AS f(space, document_id, fact_id, kind, evidence, operation_id, ordinal)
"""


ENSURE_HISTORY = """
INSERT INTO document_history (space, document_id, revision, operation_id, state, committed_at)
SELECT space, document_id, revision, operation_id, state, committed_at
FROM json_to_recordset(%(states)s::json) AS h(
    space text, document_id text, revision int, operation_id text, state jsonb,
    committed_at timestamptz
)
ON CONFLICT (space, document_id, revision) DO NOTHING
"""


# Operations that may write the graph of a document next, or may have written it without
# committing: built on its current revision (0 when it has none) and not finished.
IN_FLIGHT_OPERATIONS = (
    "SELECT "
    + OPERATION_COLUMNS_OF_O
    + """
FROM unnest(%(space)b::text[], %(document_id)b::text[]) AS k(space, document_id)
JOIN operations AS o ON o.space = k.space AND o.document_id = k.document_id
LEFT JOIN document_states AS d ON d.space = k.space AND d.document_id = k.document_id
WHERE o.stage = ANY(%(stages)b::text[]) AND o.expected_revision = COALESCE(d.revision, 0)
ORDER BY o.space, o.document_id, o.created_at, o.operation_id
"""
)


GET_DOCUMENT_STATE = """
SELECT d.space, d.document_id, d.revision, d.operation_id, d.content_hash, d.document_version,
       d.node_ids, d.edge_keys, d.superseded_edge_keys, d.kept_edge_keys, d.base_operation_id,
       d.schema_version,
       d.extraction_fingerprint, d.source_updated_at, d.committed_at,
       COALESCE(
           (SELECT jsonb_agg(
                       jsonb_build_object('fact_id', f.fact_id, 'kind', f.kind,
                                          'evidence', f.evidence)
                       ORDER BY f.ordinal, f.fact_id)
            FROM fact_sources AS f
            WHERE f.space = d.space AND f.document_id = d.document_id),
           '[]'::jsonb
       ) AS fact_sources
FROM document_states AS d
WHERE d.space = %s AND d.document_id = %s
"""


DOCUMENT_HISTORY = """
SELECT state FROM document_history
WHERE space = %s AND document_id = %s
ORDER BY revision
"""


# Keyset pagination on the primary key; NULL filters match everything.
COMMITTED_ELEMENTS_PAGE = """
SELECT space, document_id, revision, operation_id, node_ids, edge_keys, superseded_edge_keys,
       kept_edge_keys
FROM document_states
WHERE (%(space)b::text IS NULL OR space = %(space)b::text)
  AND (%(document_id)b::text IS NULL OR document_id = %(document_id)b::text)
  AND (space, document_id) > (%(after_space)b::text, %(after_document_id)b::text)
ORDER BY space, document_id
LIMIT %(limit)b
"""


# The candidates (by ordinal) whose edge another document's state lists among its edge keys
# (a containment check per candidate, on the GIN index of migration 0004).
CLAIMED_EDGES = """
SELECT k.ord
FROM unnest(%(space)b::text[], %(document_id)b::text[], %(edge)b::text[])
  WITH ORDINALITY AS k(space, document_id, edge, ord)
WHERE EXISTS (
    SELECT 1 FROM document_states AS d
    WHERE (d.edge_keys @> jsonb_build_array(k.edge::jsonb)
           OR d.kept_edge_keys @> jsonb_build_array(k.edge::jsonb))
      AND (d.space, d.document_id) <> (k.space, k.document_id)
)
"""


# The candidates (by ordinal) whose node another document's state lists among its node ids.
CLAIMED_NODES = """
SELECT k.ord
FROM unnest(%(space)b::text[], %(document_id)b::text[], %(node_id)b::text[])
  WITH ORDINALITY AS k(space, document_id, node_id, ord)
WHERE EXISTS (
    SELECT 1 FROM document_states AS d
    WHERE d.node_ids @> jsonb_build_array(k.node_id)
      AND (d.space, d.document_id) <> (k.space, k.document_id)
)
"""


# The node ids no document's state lists (reconcile's unreferenced nodes; GIN index of 0004).
UNLISTED_NODES = """
SELECT k.node_id
FROM unnest(%(node_id)b::text[]) AS k(node_id)
WHERE NOT EXISTS (SELECT 1 FROM document_states AS d WHERE d.node_ids @> jsonb_build_array(k.node_id))
"""
