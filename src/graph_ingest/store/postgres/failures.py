"""The failure log port on PostgreSQL: one ``failure_attempts`` row per routed message."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_ingest.domain.error_detail import ErrorDetail
from graph_ingest.store.failures import FailureAttempt
from graph_ingest.store.postgres.params import Row, key_columns
from graph_ingest.store.postgres.session import TransactionSession
from graph_ingest.store.postgres.translate import translated

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


class PostgresFailureLog(TransactionSession):
    """``FailureLog`` in a unit of work."""

    @translated
    def record_failure(self, attempt: FailureAttempt) -> bool:
        return bool(self._fetch(RECORD_FAILURE, failure_params(attempt)))

    @translated
    def routed_sources(
        self, positions: Sequence[tuple[str, int, int]]
    ) -> dict[tuple[str, int, int], str]:
        if not positions:
            return {}
        found = self._fetch(
            ROUTED_SOURCES, key_columns(("topic", "partition", "offset"), positions)
        )
        return {
            (row["source_topic"], row["source_partition"], row["source_offset"]): row["routed_to"]
            for row in found
        }

    @translated
    def failure_history(self, operation_id: str) -> list[FailureAttempt]:
        self._cur.execute(FAILURE_HISTORY, (operation_id,))
        return [failure_from_row(row) for row in self._cur.fetchall()]


def failure_params(attempt: FailureAttempt) -> dict[str, Any]:
    topic, partition, offset = attempt.source or (None, None, None)
    return {
        "source_topic": topic,
        "source_partition": partition,
        "source_offset": offset,
        "operation_id": attempt.operation_id,
        "attempt": attempt.attempt,
        "tier": attempt.tier,
        "routed_to": attempt.routed_to,
        "at": attempt.at,
        "detail": attempt.detail.model_dump_json(),
    }


def failure_from_row(row: Row) -> FailureAttempt:
    topic = row["source_topic"]
    return FailureAttempt(
        source=None if topic is None else (topic, row["source_partition"], row["source_offset"]),
        operation_id=row["operation_id"],
        attempt=row["attempt"],
        tier=row["tier"],
        routed_to=row["routed_to"],
        at=row["at"],
        detail=ErrorDetail.model_validate(row["detail"]),
    )
