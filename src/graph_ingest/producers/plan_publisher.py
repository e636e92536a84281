"""Publish frozen plans to the plans topic, and read plan files for ``graph-ingest publish-plan``.

Every plan is verified (its fingerprint recomputed) before anything is produced: a batch with one
bad plan publishes nothing. Key = ``space/document_id`` so all plans of a document share a partition.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.producer import KafkaProducer
from graph_ingest.schemas.plan_messages import plan_message
from graph_ingest.settings import Settings

logger = logging.getLogger(__name__)


class PlanFileError(GraphIngestError):
    """A plan file that cannot be read, parsed or validated; the message names file and field."""

    code = StatusCode.INVALID_ARGUMENT


class PlanPublisher:
    """Produces plans to ``settings.topics.plans``; the Kafka client is created in :meth:`start`."""

    def __init__(self, settings: Settings) -> None:
        self._topic = settings.topics.plans
        self._producer = KafkaProducer(settings.kafka)

    def start(self) -> None:
        self._producer.start()

    def close(self) -> None:
        self._producer.close()

    def __enter__(self) -> PlanPublisher:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def publish(self, plans: Sequence[IngestionPlan]) -> None:
        """Verify and encode every plan, then produce them in order; returns once all are
        acknowledged (``acks=all``), raises if any is not."""
        messages = [plan_message(plan, self._topic) for plan in plans]
        if not messages:
            return
        self._producer.start()  # idempotent: publish works without an explicit start()
        self._producer.produce_batch(messages)
        for plan in plans:
            logger.info(
                "%s published op=%s key=%s fingerprint=%s",
                self._topic,
                plan.operation_id,
                plan.key,
                plan.fingerprint,
            )


def load_plan_file(path: str | Path) -> list[IngestionPlan]:
    """Read a JSON file holding one plan object or a list of them.

    A plan without ``fingerprint`` is frozen now (``IngestionPlan.freeze``); a plan with one must
    recompute to exactly that fingerprint. Errors name the file, the plan and the field path.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise PlanFileError(f"{path}: no such file", code=StatusCode.NOT_FOUND) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"{path}: cannot read: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanFileError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc

    if isinstance(data, dict):
        items: list[Any] = [data]
        where = ["(the plan)"]
    elif isinstance(data, list):
        items = data
        where = [f"plan [{i}]" for i in range(len(data))]
    else:
        raise PlanFileError(
            f"{path}: expected a plan object or a list of plans, found {type(data).__name__}"
        )
    if not items:
        raise PlanFileError(f"{path}: the list of plans is empty")
    return [_load_plan(path, label, item) for label, item in zip(where, items, strict=True)]


def _load_plan(path: Path, label: str, item: Any) -> IngestionPlan:
    if not isinstance(item, dict):
        raise PlanFileError(f"{path}: {label}: expected an object, found {type(item).__name__}")
    name = f"{label} (operation_id {item['operation_id']!r})" if "operation_id" in item else label
    try:
        if "fingerprint" not in item:
            return IngestionPlan.freeze(**item)
        # created_at is not part of the fingerprint: default it, as freeze() does.
        plan = IngestionPlan.model_validate({"created_at": datetime.now(UTC), **item})
    except ValidationError as exc:
        raise PlanFileError(f"{path}: {name} is invalid:\n{_describe(exc)}") from exc
    except GraphIngestError as exc:
        raise PlanFileError(f"{path}: {name} is invalid: {exc}", code=exc.code) from exc
    actual = plan.computed_fingerprint()
    if actual != plan.fingerprint:
        raise PlanFileError(
            f"{path}: {name}: the plan does not match its fingerprint (was it edited after "
            f"freezing?): carried {plan.fingerprint}, recomputed {actual}. Remove the "
            f'"fingerprint" field to freeze the plan as it is now.',
            code=StatusCode.DATA_LOSS,
        )
    return plan


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "(plan)"
        lines.append(f"  {field}: {error['msg']}")
    return "\n".join(lines)


__all__ = [
    "PlanFileError",
    "PlanPublisher",
    "load_plan_file",
]
