"""SQL pieces more than one concern's statements share: operation columns, locks, "on its way".

Names in statements are unqualified: the connection's search_path points at the configured schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.stages import Stage
from graph_ingest.store.parking import ON_ITS_WAY
from graph_ingest.store.postgres.params import json_text

OPERATION_COLUMNS = """
    operation_id, space, document_id, expected_revision, fingerprint, stage, sequence, attempts,
    last_error_code, last_error_class, last_error_message, stage_times, next_retry_at, dlq_id,
    created_at, updated_at, details"""

OPERATION_COLUMNS_OF_O = ", ".join(f"o.{column.strip()}" for column in OPERATION_COLUMNS.split(","))
"""``OPERATION_COLUMNS`` of the table aliased ``o``."""


def advisory_xact_locks(namespace: str) -> str:
    """One transaction-scoped advisory lock per (schema, space, name) of ``%(keys)s`` (a JSON
    array of [space, name] pairs: ``lock_keys``), taken in a stable order so that two
    transactions locking overlapping sets cannot deadlock on them."""
    return f"""
SELECT count(pg_advisory_xact_lock(lock_key))
FROM (
    SELECT DISTINCT hashtextextended(
        '{namespace}' || chr(31) || current_schema() || chr(31) || (k.key ->> 0) || chr(31)
        || (k.key ->> 1),
        0
    ) AS lock_key
    FROM json_array_elements(%(keys)s::json) AS k(key)
    ORDER BY lock_key
) AS locks
"""


def lock_keys(keys: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The parameters of ``advisory_xact_locks``: one JSON text (serialised in C), where two
    arrays cost the driver about half a microsecond per value."""
    return {"keys": json_text(keys)}


def nothing_on_its_way(revision: str) -> str:
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


def on_its_way_params() -> dict[str, Any]:
    """The parameters of ``nothing_on_its_way``."""
    return {
        "on_its_way": sorted(stage.value for stage in ON_ITS_WAY),
        "dead_lettered": Stage.DEAD_LETTERED.value,
        "resolved": DlqStatus.RESOLVED.value,
    }
