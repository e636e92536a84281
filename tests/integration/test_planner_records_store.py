"""The planner's records in PostgresOperationStore: submissions and claim-checked plans."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graph_ingest.schemas.claim_check import PlanClaim
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.store.submissions import Submission
from tests.integration.test_postgres_store import pg, store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
__all__ = ["pg", "store"]

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def submission(submission_id: str, **changes: object) -> Submission:
    fields: dict[str, object] = {
        "submission_id": submission_id,
        "space": "kb",
        "document_id": "doc-1",
        "operation_id": "op-1",
        "dlq_id": None,
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "source": ("ingest.requests", 2, 17),
        "planned_at": AT,
    }
    return Submission(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_submission_reads_back_and_a_later_record_replaces_it(
    store: PostgresOperationStore,
) -> None:
    with store.unit_of_work() as uow:
        uow.record_submissions([submission("sub-1"), submission("sub-2", operation_id="op-2")])

    assert store.get_submission("sub-1") == submission("sub-1")
    assert store.get_submission("missing") is None

    # A submission planned again (after an aborted transaction) went to the DLQ this time.
    again = submission(
        "sub-1", operation_id=None, dlq_id="dlq-9", source=("ingest.requests", 2, 18)
    )
    with store.unit_of_work() as uow:
        uow.record_submissions([again])

    # the record is replaced, except where the submission was first sent: its place among the
    # document's requests (a replan or a second send re-enters the topic later)
    assert store.get_submission("sub-1") == submission(
        "sub-1", operation_id=None, dlq_id="dlq-9", source=("ingest.requests", 2, 17)
    )
    assert store.get_submission("sub-2") == submission("sub-2", operation_id="op-2")


def test_a_claim_is_written_once_and_read_by_operation_and_fingerprint(
    store: PostgresOperationStore,
) -> None:
    with store.unit_of_work() as uow:
        uow.put_plan_claims([PlanClaim("op-1", "v1:aa", b"plan one")])
    with store.unit_of_work() as uow:  # first writer wins: the bytes of a key never change
        uow.put_plan_claims(
            [PlanClaim("op-1", "v1:aa", b"other bytes"), PlanClaim("op-2", "v1:bb", b"plan two")]
        )

    found = store.plan_claims([("op-1", "v1:aa"), ("op-2", "v1:bb"), ("op-1", "v1:zz")])

    assert found == {("op-1", "v1:aa"): b"plan one", ("op-2", "v1:bb"): b"plan two"}
    assert store.plan_claims([]) == {}
