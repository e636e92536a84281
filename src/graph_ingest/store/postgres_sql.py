"""The SQL of the PostgreSQL store. Every batch statement is set-based: parallel arrays in
(``unnest``), one statement out, whatever the batch size. Names are unqualified: the connection's
search_path points at the configured schema."""

from __future__ import annotations

OPERATION_COLUMNS = """
    operation_id, space, document_id, expected_revision, fingerprint, stage, sequence, attempts,
    last_error_code, last_error_class, last_error_message, stage_times, next_retry_at, dlq_id,
    created_at, updated_at"""

# Create-if-absent (first writer wins) and, for the rows this statement created, their PREPARED
# event in the outbox: one statement.
INSERT_OPERATIONS = """
WITH incoming AS (
    SELECT *
    FROM unnest(
        %(operation_id)b::text[], %(space)b::text[], %(document_id)b::text[],
        %(expected_revision)b::int[], %(fingerprint)b::text[], %(plan_bytes)b::bytea[],
        %(stage)b::text[], %(sequence)b::int[], %(attempts)b::int[],
        %(last_error_code)b::text[], %(last_error_class)b::text[], %(last_error_message)b::text[],
        %(stage_times)b::text[], %(next_retry_at)b::timestamptz[], %(dlq_id)b::text[],
        %(created_at)b::timestamptz[], %(updated_at)b::timestamptz[],
        %(message_key)b::bytea[], %(message_value)b::bytea[], %(headers)b::text[],
        %(work_headers)b::text[], %(first_topic)b::text[], %(first_partition)b::int[],
        %(first_offset)b::bigint[]
    ) WITH ORDINALITY AS i(
        operation_id, space, document_id, expected_revision, fingerprint, plan_bytes, stage,
        sequence, attempts, last_error_code, last_error_class, last_error_message, stage_times,
        next_retry_at, dlq_id, created_at, updated_at, message_key, message_value, headers,
        work_headers, first_topic, first_partition, first_offset, ord
    )
), inserted AS (
    INSERT INTO operations (
        operation_id, space, document_id, expected_revision, fingerprint, plan_bytes, stage,
        sequence, attempts, last_error_code, last_error_class, last_error_message, stage_times,
        next_retry_at, dlq_id, created_at, updated_at, work_headers, first_topic,
        first_partition, first_offset
    )
    SELECT operation_id, space, document_id, expected_revision, fingerprint, plan_bytes, stage,
           sequence, attempts, last_error_code, last_error_class, last_error_message,
           stage_times::jsonb, next_retry_at, dlq_id, created_at, updated_at, work_headers::jsonb,
           first_topic, first_partition, first_offset
    FROM incoming
    ORDER BY operation_id  -- a stable order: concurrent inserters wait instead of deadlocking
    ON CONFLICT (operation_id) DO NOTHING
    RETURNING operation_id
)
INSERT INTO outbox (topic, message_key, message_value, headers, operation_id, sequence)
SELECT %(topic)b, i.message_key, i.message_value, i.headers::jsonb, i.operation_id, i.sequence
FROM incoming AS i JOIN inserted USING (operation_id)
ORDER BY i.ord
"""

LOCK_OPERATIONS = (
    "SELECT"
    + OPERATION_COLUMNS
    + """
FROM operations
WHERE operation_id = ANY(%(operation_id)b::text[])
ORDER BY operation_id
FOR UPDATE
"""
)

# Optimistic compare-and-set on sequence, and the events of the rows it moved, in one statement.
# Returns the ids it updated; the caller compares them with what it asked for.
SAVE_OPERATIONS = """
WITH snapshot AS (
    SELECT *
    FROM unnest(
        %(operation_id)b::text[], %(expected_sequence)b::int[], %(stage)b::text[],
        %(sequence)b::int[], %(attempts)b::int[], %(last_error_code)b::text[],
        %(last_error_class)b::text[], %(last_error_message)b::text[], %(stage_times)b::text[],
        %(next_retry_at)b::timestamptz[], %(dlq_id)b::text[], %(updated_at)b::timestamptz[]
    ) AS s(
        operation_id, expected_sequence, stage, sequence, attempts, last_error_code,
        last_error_class, last_error_message, stage_times, next_retry_at, dlq_id, updated_at
    )
), updated AS (
    UPDATE operations AS o
    SET stage = s.stage,
        sequence = s.sequence,
        attempts = s.attempts,
        last_error_code = s.last_error_code,
        last_error_class = s.last_error_class,
        last_error_message = s.last_error_message,
        stage_times = s.stage_times::jsonb,
        next_retry_at = s.next_retry_at,
        dlq_id = s.dlq_id,
        updated_at = s.updated_at
    FROM snapshot AS s
    WHERE o.operation_id = s.operation_id AND o.sequence = s.expected_sequence
    RETURNING o.operation_id
), event AS (
    SELECT *
    FROM unnest(
        %(event_operation_id)b::text[], %(event_sequence)b::int[], %(event_key)b::bytea[],
        %(event_value)b::bytea[], %(event_headers)b::text[]
    ) WITH ORDINALITY AS e(operation_id, sequence, message_key, message_value, headers, ord)
), published AS (
    INSERT INTO outbox (topic, message_key, message_value, headers, operation_id, sequence)
    SELECT %(topic)b, e.message_key, e.message_value, e.headers::jsonb, e.operation_id, e.sequence
    FROM event AS e JOIN updated USING (operation_id)
    ORDER BY e.ord
)
SELECT operation_id FROM updated
"""

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
    FROM unnest(
        %(space)b::text[], %(document_id)b::text[], %(revision)b::int[], %(operation_id)b::text[],
        %(content_hash)b::text[], %(document_version)b::text[], %(node_ids)b::text[],
        %(edge_keys)b::text[], %(superseded_edge_keys)b::text[], %(kept_edge_keys)b::text[],
        %(base_operation_id)b::text[], %(schema_version)b::text[],
        %(extraction_fingerprint)b::text[], %(source_updated_at)b::timestamptz[],
        %(committed_at)b::timestamptz[], %(state)b::text[]
    ) AS n(
        space, document_id, revision, operation_id, content_hash, document_version, node_ids,
        edge_keys, superseded_edge_keys, kept_edge_keys, base_operation_id, schema_version,
        extraction_fingerprint, source_updated_at, committed_at, state
    )
), created AS (
    INSERT INTO document_states (
        space, document_id, revision, operation_id, content_hash, document_version, node_ids,
        edge_keys, superseded_edge_keys, kept_edge_keys, base_operation_id, schema_version,
        extraction_fingerprint, source_updated_at, committed_at
    )
    SELECT space, document_id, revision, operation_id, content_hash, document_version,
           node_ids::jsonb, edge_keys::jsonb, superseded_edge_keys::jsonb, kept_edge_keys::jsonb,
           base_operation_id, schema_version, extraction_fingerprint, source_updated_at,
           committed_at
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
        node_ids = n.node_ids::jsonb,
        edge_keys = n.edge_keys::jsonb,
        superseded_edge_keys = n.superseded_edge_keys::jsonb,
        kept_edge_keys = n.kept_edge_keys::jsonb,
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
    SELECT n.space, n.document_id, n.revision, n.operation_id, n.state::jsonb, n.committed_at
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
SELECT space, document_id, revision, operation_id, state::jsonb, committed_at
FROM unnest(
    %(space)b::text[], %(document_id)b::text[], %(revision)b::int[], %(operation_id)b::text[],
    %(state)b::text[], %(committed_at)b::timestamptz[]
) AS h(space, document_id, revision, operation_id, state, committed_at)
ON CONFLICT (space, document_id, revision) DO NOTHING
"""


def _advisory_xact_locks(namespace: str, column: str) -> str:
    """One transaction-scoped advisory lock per (schema, space, ``column``), taken in a stable
    order so that two transactions locking overlapping sets cannot deadlock on them."""
    return f"""
SELECT count(pg_advisory_xact_lock(lock_key))
FROM (
    SELECT DISTINCT hashtextextended(
        '{namespace}' || chr(31) || current_schema() || chr(31) || space || chr(31) || {column},
        0
    ) AS lock_key
    FROM unnest(%(space)b::text[], %({column})s::text[]) AS k(space, {column})
    ORDER BY lock_key
) AS locks
"""


# Serialises the apply steps of one document (parking, fencing the graph write, committing).
LOCK_DOCUMENTS = _advisory_xact_locks("document", "document_id")

# Serialises "one type per node" registry checks for the same node.
LOCK_REGISTRY_NODES = _advisory_xact_locks("entity_registry", "node_id")

# Existing rows for any of the keys or nodes (a superset: the caller matches exactly), locked.
# Written as two index-friendly disjuncts (primary key; (space, node_id)).
SELECT_REGISTRY = """
SELECT space, entity_type, normalized_name, name, node_id, aliases
FROM entity_registry
WHERE (space = ANY(%(space)b::text[])
       AND entity_type = ANY(%(entity_type)b::text[])
       AND normalized_name = ANY(%(normalized_name)b::text[]))
   OR (space = ANY(%(space)b::text[]) AND node_id = ANY(%(node_id)b::text[]))
FOR UPDATE
"""

# A name registered concurrently to another node is not touched (WHERE) and not returned.
UPSERT_REGISTRY = """
INSERT INTO entity_registry AS r (
    space, entity_type, normalized_name, name, node_id, aliases, created_at, updated_at
)
SELECT space, entity_type, normalized_name, name, node_id,
       ARRAY(SELECT jsonb_array_elements_text(aliases::jsonb)), now(), now()
FROM unnest(
    %(space)b::text[], %(entity_type)b::text[], %(normalized_name)b::text[], %(name)b::text[],
    %(node_id)b::text[], %(aliases)b::text[]
) AS i(space, entity_type, normalized_name, name, node_id, aliases)
ON CONFLICT (space, entity_type, normalized_name) DO UPDATE
SET aliases = ARRAY(
        SELECT DISTINCT (alias COLLATE "C") FROM unnest(r.aliases || EXCLUDED.aliases) AS alias
        ORDER BY 1
    ),
    updated_at = now()
WHERE r.node_id = EXCLUDED.node_id
RETURNING space, entity_type, normalized_name
"""

SELECT_REGISTRY_NODES = """
SELECT r.space, r.entity_type, r.normalized_name, r.node_id
FROM entity_registry AS r
JOIN unnest(%(space)b::text[], %(entity_type)b::text[], %(normalized_name)b::text[])
  AS k(space, entity_type, normalized_name)
  ON r.space = k.space AND r.entity_type = k.entity_type
 AND r.normalized_name = k.normalized_name
"""

PARKED_BEHIND = (
    "SELECT "
    + ", ".join(f"o.{column.strip()}" for column in OPERATION_COLUMNS.split(","))
    + """, o.plan_bytes, o.work_headers
FROM operations AS o
JOIN unnest(%(space)b::text[], %(document_id)b::text[], %(expected_revision)b::int[])
  WITH ORDINALITY AS k(space, document_id, expected_revision, ord)
  ON o.space = k.space AND o.document_id = k.document_id
 AND o.expected_revision = k.expected_revision
WHERE o.stage = %(parked)b
   OR (o.stage = %(dead_lettered)b AND EXISTS (
        SELECT 1 FROM dlq_entries AS d
        WHERE d.dlq_id = o.dlq_id AND d.parked_behind IS NOT NULL AND d.status = %(pending)b))
ORDER BY k.ord, o.created_at, o.operation_id
FOR UPDATE OF o
"""
)

ENQUEUE = """
INSERT INTO outbox (topic, message_key, message_value, headers, operation_id, sequence)
SELECT topic, message_key, message_value, headers::jsonb, operation_id, sequence
FROM unnest(
    %(topic)b::text[], %(message_key)b::bytea[], %(message_value)b::bytea[], %(headers)b::text[],
    %(operation_id)b::text[], %(sequence)b::int[]
) WITH ORDINALITY AS m(topic, message_key, message_value, headers, operation_id, sequence, ord)
ORDER BY ord
"""

RECORD_FAILURE = """
INSERT INTO failure_attempts (
    source_topic, source_partition, source_offset, operation_id, attempt, tier, routed_to, at,
    detail
)
VALUES (
    %(source_topic)b, %(source_partition)b, %(source_offset)b, %(operation_id)b, %(attempt)b,
    %(tier)b, %(routed_to)b, %(at)b, %(detail)b::jsonb
)
ON CONFLICT (source_topic, source_partition, source_offset) DO NOTHING
RETURNING id
"""

ROUTED_SOURCES = """
SELECT f.source_topic, f.source_partition, f.source_offset, f.routed_to
FROM failure_attempts AS f
JOIN unnest(%(topic)b::text[], %(partition)b::int[], %(offset)b::bigint[])
  AS k(topic, partition, "offset")
  ON f.source_topic = k.topic AND f.source_partition = k.partition
 AND f.source_offset = k."offset"
"""

FAILURE_HISTORY = """
SELECT source_topic, source_partition, source_offset, operation_id, attempt, tier, routed_to, at,
       detail
FROM failure_attempts
WHERE operation_id = %s
ORDER BY attempt, id
"""

PARKED_ON_DOCUMENT = (
    "SELECT"
    + OPERATION_COLUMNS
    + """, plan_bytes
FROM operations
WHERE space = %(space)b AND document_id = %(document_id)b AND stage = %(stage)b
ORDER BY expected_revision, created_at, operation_id
FOR UPDATE
"""
)


def _nothing_on_its_way(revision: str) -> str:
    """No operation of the document of ``o`` that expects ``revision`` (an SQL expression) is on
    its way to commit it: in flight or parked (``%(on_its_way)s``), or dead-lettered with an
    entry that is not RESOLVED (a replay may still bring it)."""
    return f"""NOT EXISTS (
      SELECT 1
      FROM operations AS p
      LEFT JOIN dlq_entries AS pd ON pd.dlq_id = p.dlq_id
      WHERE p.space = o.space AND p.document_id = o.document_id
        AND p.expected_revision = {revision}
        AND (p.stage = ANY(%(on_its_way)b::text[])
             OR (p.stage = %(dead_lettered)b AND pd.status IS DISTINCT FROM %(resolved)b)))"""


def _dead_lettered_at(entry_status: str, condition: str | None = None) -> str:
    """Per (space, document_id, expected_revision) of the keys: the oldest DEAD_LETTERED operation
    expecting that revision whose entry has status ``entry_status`` (a parameter), where
    ``condition`` (if any) holds."""
    also = f" AND {condition}" if condition else ""
    return (
        "SELECT DISTINCT ON (o.space, o.document_id) "
        + ", ".join(f"o.{column.strip()}" for column in OPERATION_COLUMNS.split(","))
        + f"""
FROM operations AS o
JOIN unnest(%(space)b::text[], %(document_id)b::text[], %(expected_revision)b::int[])
  AS k(space, document_id, expected_revision)
  ON o.space = k.space AND o.document_id = k.document_id
 AND o.expected_revision = k.expected_revision
JOIN dlq_entries AS d ON d.dlq_id = o.dlq_id AND d.status = {entry_status}
WHERE o.stage = %(dead_lettered)b{also}
ORDER BY o.space, o.document_id, o.created_at, o.operation_id
"""
    )


DEAD_LETTERED_AT = _dead_lettered_at("%(pending)b")

# A purged leader: its entry RESOLVED, and nothing else on its way to commit its revision.
PURGED_LEADERS_AT = _dead_lettered_at("%(resolved)b", _nothing_on_its_way("o.expected_revision"))

# The later versions of a document that wait behind its operation expecting %(revision)s: parked,
# or dead-lettered with an entry still pending review (they followed it to the DLQ).
WAITING_BEHIND = (
    "SELECT"
    + OPERATION_COLUMNS
    + """
FROM operations AS o
WHERE o.space = %(space)b AND o.document_id = %(document_id)b
  AND o.expected_revision > %(revision)b
  AND (o.stage = %(parked)b OR (o.stage = %(dead_lettered)b AND EXISTS (
        SELECT 1 FROM dlq_entries AS d WHERE d.dlq_id = o.dlq_id AND d.status = %(pending)b)))
ORDER BY o.expected_revision, o.created_at, o.operation_id
FOR UPDATE
"""
)

DLQ_ENTRY_COLUMNS = """
    dlq_id, status, operation_id, fingerprint, space, document_id, code, error_class, message,
    parked_behind, original_topic, original_partition, original_offset, attempts,
    dead_lettered_at, envelope"""

DLQ_ENTRIES = (
    "SELECT"
    + DLQ_ENTRY_COLUMNS
    + """
FROM dlq_entries
WHERE dlq_id = ANY(%(dlq_id)b::text[])
ORDER BY dlq_id
FOR UPDATE
"""
)

PUT_DLQ_ENTRIES = (
    "INSERT INTO dlq_entries ("
    + DLQ_ENTRY_COLUMNS
    + """)
SELECT *
FROM unnest(
    %(dlq_id)b::text[], %(status)b::text[], %(operation_id)b::text[], %(fingerprint)b::text[],
    %(space)b::text[], %(document_id)b::text[], %(code)b::text[], %(error_class)b::text[],
    %(message)b::text[], %(parked_behind)b::text[], %(original_topic)b::text[],
    %(original_partition)b::int[], %(original_offset)b::bigint[], %(attempts)b::int[],
    %(dead_lettered_at)b::timestamptz[], %(envelope)b::bytea[]
)
ON CONFLICT (dlq_id) DO UPDATE SET
"""
    + ",\n".join(
        f"    {column.strip()} = EXCLUDED.{column.strip()}"
        for column in DLQ_ENTRY_COLUMNS.split(",")[1:]
    )
)

# `dlq reindex`: writers of the index (routing, replay, purge) wait while the rows are replaced.
LOCK_DLQ_INDEX = "LOCK TABLE dlq_entries IN EXCLUSIVE MODE"

DELETE_DLQ_ENTRIES = "DELETE FROM dlq_entries"

# A sequential scan of the outbox (its index covers unpublished rows only): reindex is rare.
NEWEST_OUTBOX_VALUES = """
SELECT DISTINCT ON (message_key) message_key, message_value
FROM outbox
WHERE topic = %(topic)s AND message_key IS NOT NULL
  AND (published_at IS NULL OR published_at >= %(since)s)
ORDER BY message_key, id DESC
"""

# Operations that may write the graph of a document next, or may have written it without
# committing: built on its current revision (0 when it has none) and not finished.
IN_FLIGHT_OPERATIONS = (
    "SELECT "
    + ", ".join(f"o.{column.strip()}" for column in OPERATION_COLUMNS.split(","))
    + """
FROM unnest(%(space)b::text[], %(document_id)b::text[]) AS k(space, document_id)
JOIN operations AS o ON o.space = k.space AND o.document_id = k.document_id
LEFT JOIN document_states AS d ON d.space = k.space AND d.document_id = k.document_id
WHERE o.stage = ANY(%(stages)b::text[]) AND o.expected_revision = COALESCE(d.revision, 0)
ORDER BY o.space, o.document_id, o.created_at, o.operation_id
"""
)

# -- reads (outside a unit of work) ------------------------------------------------------------

GET_OPERATION = "SELECT" + OPERATION_COLUMNS + "\nFROM operations WHERE operation_id = %s"

GET_PLAN_BYTES = "SELECT plan_bytes FROM operations WHERE operation_id = %s"
FIRST_DELIVERIES = """
SELECT operation_id, first_topic, first_partition, first_offset FROM operations
WHERE operation_id = ANY(%(operation_id)b::text[]) AND first_topic IS NOT NULL
"""

GET_WORK_HEADERS = "SELECT work_headers FROM operations WHERE operation_id = %s"

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

PLAN_BYTES_OF = """
SELECT operation_id, plan_bytes FROM operations WHERE operation_id = ANY(%(operation_id)b::text[])
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

# Plans written to the graph whose state is not committed yet (the applier's delete guard).
GRAPH_APPLIED_PLANS = """
SELECT space, document_id, plan_bytes FROM operations
WHERE stage = 'GRAPH_APPLIED' AND space = ANY(%(space)b::text[])
"""

# The node ids no document's state lists (reconcile's unreferenced nodes; GIN index of 0004).
UNLISTED_NODES = """
SELECT k.node_id
FROM unnest(%(node_id)b::text[]) AS k(node_id)
WHERE NOT EXISTS (SELECT 1 FROM document_states AS d WHERE d.node_ids @> jsonb_build_array(k.node_id))
"""

DATABASE_TIME = "SELECT clock_timestamp() AS now"

# A NULL filter matches everything; the keyset cursor (after_at, after_id) pages oldest first.
_DLQ_FILTER = """
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(code)s::text IS NULL OR code = %(code)s::text)
  AND (%(space)s::text IS NULL OR space = %(space)s::text)
  AND (%(document_id)s::text IS NULL OR document_id = %(document_id)s::text)
  AND (%(older_than_s)s::float8 IS NULL
       OR dead_lettered_at <= now() - make_interval(secs => %(older_than_s)s::float8))
  AND (%(after_at)s::timestamptz IS NULL
       OR (dead_lettered_at, dlq_id) > (%(after_at)s::timestamptz, %(after_id)s::text))
"""

LIST_DLQ_ENTRIES = (
    "SELECT"
    + DLQ_ENTRY_COLUMNS
    + "\nFROM dlq_entries"
    + _DLQ_FILTER
    + "ORDER BY dead_lettered_at, dlq_id\nLIMIT %(limit)s\n"
)

COUNT_DLQ_ENTRIES = "SELECT count(*) AS entries FROM dlq_entries" + _DLQ_FILTER

GET_DLQ_ENTRY = "SELECT" + DLQ_ENTRY_COLUMNS + "\nFROM dlq_entries WHERE dlq_id = %s"

DLQ_STATS = """
SELECT code, status, count(*) AS entries,
       EXTRACT(EPOCH FROM now() - min(dead_lettered_at))::float8 AS oldest_age_s
FROM dlq_entries
GROUP BY code, status
ORDER BY code, status
"""

# -- recovery leases (own short transactions, outside a unit of work) ---------------------------

_RECOVERY_RETURNING = (
    "RETURNING "
    + ", ".join(f"o.{column.strip()}" for column in OPERATION_COLUMNS.split(","))
    + ", o.plan_bytes, o.work_headers, o.recovery_claimed_by, o.recovery_lease_until,"
    + " o.recovery_claims"
)

# SKIP LOCKED: two recoverers claiming at once take disjoint rows, and neither waits for an
# applier holding an operation. A row whose lease another recoverer committed after this
# statement's snapshot is re-checked on the newest version (READ COMMITTED) and left out.
CLAIM_FOR_RECOVERY = (
    """
WITH candidates AS (
    SELECT operation_id
    FROM operations
    WHERE stage = ANY(%(stages)b::text[])
      AND updated_at <= now() - make_interval(secs => %(older_than_s)b)
      AND (recovery_lease_until IS NULL OR recovery_lease_until <= now())
      AND (next_retry_at IS NULL OR next_retry_at <= now())
      -- A PARKED operation is stranded only once its document has reached the revision it waits
      -- for (its release was lost) or passed it; before that, its predecessor releases it.
      AND (stage <> %(parked)b OR EXISTS (
          SELECT 1 FROM document_states AS d
          WHERE d.space = operations.space AND d.document_id = operations.document_id
            AND d.revision >= operations.expected_revision))
    ORDER BY updated_at, operation_id
    LIMIT %(limit)b
    FOR UPDATE SKIP LOCKED
)
UPDATE operations AS o
SET recovery_claimed_by = %(claimer)b,
    recovery_lease_until = now() + make_interval(secs => %(lease_s)b),
    recovery_claims = o.recovery_claims + 1
FROM candidates AS c
WHERE o.operation_id = c.operation_id
"""
    + _RECOVERY_RETURNING
)

CLAIM_OPERATION = (
    """
UPDATE operations AS o
SET recovery_claimed_by = %(claimer)b,
    recovery_lease_until = now() + make_interval(secs => %(lease_s)b),
    recovery_claims = o.recovery_claims + 1
WHERE o.operation_id = %(operation_id)b AND o.stage = ANY(%(stages)b::text[])
"""
    + _RECOVERY_RETURNING
)

# PARKED operations whose predecessor is gone: no operation of the document that expects its
# committed revision is on its way, so the revision they wait for never commits.
STRANDED_PARKED = (
    "SELECT "
    + ", ".join(f"o.{column.strip()}" for column in OPERATION_COLUMNS.split(","))
    + """
FROM operations AS o
LEFT JOIN document_states AS s ON s.space = o.space AND s.document_id = o.document_id
WHERE o.stage = %(parked)b
  AND o.updated_at <= now() - make_interval(secs => %(older_than_s)b)
  AND o.expected_revision > COALESCE(s.revision, 0)
  AND """
    + _nothing_on_its_way("COALESCE(s.revision, 0)")
    + """
ORDER BY o.updated_at, o.operation_id
LIMIT %(limit)b
"""
)

RELEASE_RECOVERY_CLAIM = """
UPDATE operations
SET recovery_lease_until = NULL
WHERE operation_id = %s AND recovery_claimed_by = %s AND recovery_lease_until IS NOT NULL
RETURNING operation_id
"""

# -- the planner: submissions and the claim check ----------------------------------------------

SUBMISSION_COLUMNS = """
    submission_id, space, document_id, operation_id, dlq_id, trace_id, source_topic,
    source_partition, source_offset, planned_at, issues, issue_count"""

RECORD_SUBMISSIONS = (
    "INSERT INTO ingest_submissions ("
    + SUBMISSION_COLUMNS
    + """)
SELECT *
FROM unnest(
    %(submission_id)b::text[], %(space)b::text[], %(document_id)b::text[],
    %(operation_id)b::text[], %(dlq_id)b::text[], %(trace_id)b::text[], %(source_topic)b::text[],
    %(source_partition)b::int[], %(source_offset)b::bigint[], %(planned_at)b::timestamptz[],
    %(issues)b::text[]::jsonb[], %(issue_count)b::int[]
)
ON CONFLICT (submission_id) DO UPDATE SET
"""
    + ",\n".join(
        f"    {column.strip()} = EXCLUDED.{column.strip()}"
        for column in SUBMISSION_COLUMNS.split(",")[1:]
        # A submission keeps the place it was first sent at: a replan (or a second send) re-enters
        # the requests topic later, and must not make an older version the document's newest.
        if not column.strip().startswith("source_")
    )
)

GET_SUBMISSION = (
    "SELECT" + SUBMISSION_COLUMNS + "\nFROM ingest_submissions WHERE submission_id = %s"
)

SUBMISSION_OF_OPERATION = (
    "SELECT" + SUBMISSION_COLUMNS + "\nFROM ingest_submissions WHERE operation_id = %s"
    "\nORDER BY source_offset DESC LIMIT 1"
)

# Requests of one document share a partition (key space/documentId): the newest is the last one.
NEWEST_SUBMISSION = (
    "SELECT" + SUBMISSION_COLUMNS + "\nFROM ingest_submissions"
    "\nWHERE space = %s AND document_id = %s ORDER BY source_offset DESC, planned_at DESC LIMIT 1"
)

REPLAN_COLUMNS = "operation_id, submission_id, attempt, outcome, replanned_as, dlq_id, at"

RECORD_REPLANS = f"""
INSERT INTO ingest_replans AS r ({REPLAN_COLUMNS})
SELECT *
FROM unnest(
    %(operation_id)b::text[], %(submission_id)b::text[], %(attempt)b::int[], %(outcome)b::text[],
    %(replanned_as)b::text[], %(dlq_id)b::text[], %(at)b::timestamptz[]
)
ON CONFLICT (operation_id) DO UPDATE SET
    submission_id = EXCLUDED.submission_id,
    attempt = EXCLUDED.attempt,
    outcome = EXCLUDED.outcome,
    replanned_as = EXCLUDED.replanned_as,
    dlq_id = EXCLUDED.dlq_id,
    at = EXCLUDED.at
WHERE EXCLUDED.outcome IN ('REPLANNED', 'DEAD_LETTERED')
   OR (EXCLUDED.outcome = 'SUPERSEDED' AND r.outcome = 'REQUESTED')
"""

GET_REPLAN = f"SELECT {REPLAN_COLUMNS} FROM ingest_replans WHERE operation_id = %s"

REPLAN_MAKING = f"SELECT {REPLAN_COLUMNS} FROM ingest_replans WHERE replanned_as = %s LIMIT 1"

PUT_PLAN_CLAIMS = """
INSERT INTO plan_claims (operation_id, fingerprint, plan_bytes)
SELECT * FROM unnest(%(operation_id)b::text[], %(fingerprint)b::text[], %(plan_bytes)b::bytea[])
ON CONFLICT (operation_id, fingerprint) DO NOTHING
"""

PLAN_CLAIMS = """
SELECT c.operation_id, c.fingerprint, c.plan_bytes
FROM plan_claims c
JOIN unnest(%(operation_id)b::text[], %(fingerprint)b::text[]) AS k(operation_id, fingerprint)
  ON c.operation_id = k.operation_id AND c.fingerprint = k.fingerprint
"""
