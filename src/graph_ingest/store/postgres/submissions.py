"""The planner's records on PostgreSQL: ``ingest_submissions`` and ``ingest_replans``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from graph_ingest.store.postgres.params import Columns, Row, columns, json_text
from graph_ingest.store.postgres.session import PooledReads, TransactionSession
from graph_ingest.store.postgres.translate import translated
from graph_ingest.store.submissions import Replan, ReplanOutcome, Submission, SubmissionIssue

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


class PostgresPlannerRecordWriter(TransactionSession):
    """``PlannerRecordWriter`` in a unit of work."""

    @translated
    def record_submissions(self, submissions: Sequence[Submission]) -> None:
        newest = {s.submission_id: s for s in submissions}  # one row per id and statement
        if newest:
            self._execute(RECORD_SUBMISSIONS, submission_columns(list(newest.values())))

    @translated
    def record_replans(self, replans: Sequence[Replan]) -> None:
        unique = {r.operation_id: r for r in replans}
        if unique:
            self._execute(RECORD_REPLANS, replan_columns(list(unique.values())))


class PostgresPlannerRecordReader(PooledReads):
    """``PlannerRecordReader``: each call its own short read."""

    @translated
    def get_submission(self, submission_id: str) -> Submission | None:
        row = self._fetch_one(GET_SUBMISSION, (submission_id,))
        return None if row is None else submission_from_row(row)

    @translated
    def submission_of_operation(self, operation_id: str) -> Submission | None:
        row = self._fetch_one(SUBMISSION_OF_OPERATION, (operation_id,))
        return None if row is None else submission_from_row(row)

    @translated
    def newest_submission(self, space: str, document_id: str) -> Submission | None:
        row = self._fetch_one(NEWEST_SUBMISSION, (space, document_id))
        return None if row is None else submission_from_row(row)

    @translated
    def get_replan(self, operation_id: str) -> Replan | None:
        row = self._fetch_one(GET_REPLAN, (operation_id,))
        return None if row is None else replan_from_row(row)

    @translated
    def replan_making(self, operation_id: str) -> Replan | None:
        row = self._fetch_one(REPLAN_MAKING, (operation_id,))
        return None if row is None else replan_from_row(row)


_SUBMISSION_FIELDS = ("submission_id", "space", "document_id", "operation_id", "dlq_id", "trace_id")


def submission_columns(submissions: Sequence[Submission]) -> Columns:
    values = [
        {
            **{name: getattr(s, name) for name in _SUBMISSION_FIELDS},
            "source_topic": s.source[0],
            "source_partition": s.source[1],
            "source_offset": s.source[2],
            "planned_at": s.planned_at,
            "issues": json_text([asdict(issue) for issue in s.issues]),
            "issue_count": s.issue_count,
        }
        for s in submissions
    ]
    return columns(
        values,
        (
            *_SUBMISSION_FIELDS,
            "source_topic",
            "source_partition",
            "source_offset",
            "planned_at",
            "issues",
            "issue_count",
        ),
    )


def submission_from_row(row: Row) -> Submission:
    return Submission(
        **{name: row[name] for name in _SUBMISSION_FIELDS},
        source=(row["source_topic"], row["source_partition"], row["source_offset"]),
        planned_at=row["planned_at"],
        issues=tuple(SubmissionIssue(**issue) for issue in row["issues"]),
        issue_count=row["issue_count"],
    )


_REPLAN_FIELDS = ("operation_id", "submission_id", "attempt", "replanned_as", "dlq_id", "at")


def replan_columns(replans: Sequence[Replan]) -> Columns:
    values = [
        {**{name: getattr(r, name) for name in _REPLAN_FIELDS}, "outcome": r.outcome.value}
        for r in replans
    ]
    return columns(values, (*_REPLAN_FIELDS, "outcome"))


def replan_from_row(row: Row) -> Replan:
    return Replan(
        **{name: row[name] for name in _REPLAN_FIELDS}, outcome=ReplanOutcome(row["outcome"])
    )
