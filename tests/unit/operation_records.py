"""An operation as the generic Avro record fastavro writes: the reference ``operation_writer`` is
held to, and what tests use to write operation events with other schema versions."""

from __future__ import annotations

from typing import Any

from graph_ingest.domain.operation import Operation
from graph_ingest.schemas.avro_primitives import micros


def operation_record(op: Operation) -> dict[str, Any]:
    record = op.model_dump(mode="python")
    record["stage_times"] = {
        stage.value: micros(at, f"stage_times[{stage.value}]")
        for stage, at in op.stage_times.items()
    }
    record["next_retry_at"] = (
        None if op.next_retry_at is None else micros(op.next_retry_at, "next_retry_at")
    )
    record["created_at"] = micros(op.created_at, "created_at")
    record["updated_at"] = micros(op.updated_at, "updated_at")
    record["waits"] = [
        {
            "dependency": wait.dependency,
            "started_at": micros(wait.started_at, f"waits[{index}].started_at"),
            "ended_at": micros(wait.ended_at, f"waits[{index}].ended_at"),
        }
        for index, wait in enumerate(op.waits)
    ]
    return record
