"""Operation snapshots as the operations topic carries them: an operation walked through a path
of stages, one snapshot per step, and the same events duplicated and shuffled (seeded)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from graph_ingest.domain.operation import ErrorInfo, Operation
from graph_ingest.domain.plan import PlanKind
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode

START = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
UNAVAILABLE = ErrorInfo(code=StatusCode.UNAVAILABLE, error_class="Neo4jDown", message="down")

DEAD_LETTERED_AFTER_RETRY = (Stage.FAILED, Stage.PREPARED, Stage.DEAD_LETTERED)
COMPLETED = (Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.COMPLETED)
PATHS = (
    COMPLETED,
    DEAD_LETTERED_AFTER_RETRY,
    (Stage.PARKED, Stage.PREPARED, *COMPLETED),
    (Stage.CONFLICT,),
    (),
)


FAILING = frozenset({Stage.FAILED, Stage.DEAD_LETTERED})


def history(
    operation_id: str, path: Sequence[Stage], *, document: str = "doc", v2: bool = True
) -> list[Operation]:
    """Every snapshot of an operation walked from PREPARED through ``path``, one second apart; a
    FAILED or DEAD_LETTERED step records an error of its own (with its own error id: of
    operation.v2; ``v2=False``: the v1 fields only, every error alike)."""
    operation = Operation.prepared(
        operation_id=operation_id,
        space="it",
        document_id=document,
        expected_revision=0,
        fingerprint=f"fp-{operation_id}",
        at=START,
        plan_kind=PlanKind.INGESTION if v2 else None,
        submission_id=f"sub-{operation_id}" if v2 else None,
    )
    snapshots = [operation]
    for step, stage in enumerate(path, start=1):
        error = None
        if stage in FAILING:
            error = UNAVAILABLE.model_copy(update=failure_ids(operation_id, step) if v2 else {})
        operation = operation.transition(stage, START + timedelta(seconds=step), error)
        snapshots.append(operation)
    return snapshots


def failure_ids(operation_id: str, step: int) -> dict[str, str]:
    """The error id and trace id of the failure at ``step`` of ``operation_id`` (32 hex each)."""
    return {
        "error_id": hashlib.sha256(f"{operation_id}/{step}".encode()).hexdigest()[:32],
        "trace_id": hashlib.sha256(operation_id.encode()).hexdigest()[:32],
    }


def histories(count: int) -> list[Operation]:
    """The snapshots of ``count`` operations over every path of ``PATHS``, in order."""
    return [
        snapshot
        for i in range(count)
        for snapshot in history(f"op-{i:03d}", PATHS[i % len(PATHS)], document=f"doc-{i % 4}")
    ]


def scrambled(events: Sequence[Operation], seed: int) -> list[Operation]:
    """``events`` with a seeded third of them repeated, all shuffled."""
    rng = random.Random(seed)
    copies = [*events, *rng.sample(list(events), k=max(1, len(events) // 3))]
    rng.shuffle(copies)
    return copies
