"""What the console's pages show, pure: raw bytes as hex and as text, an operation's history as
timeline steps, and the filters of a list page read from its query string (a bad value is a
message on the page, never a crash)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TypeVar

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.operation import ErrorInfo
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.status import StatusCode
from graph_ingest.projections.fold import Transition, recorded_errors
from graph_ingest.projections.queries import InvalidQuery, OperationFilter, decode_cursor
from graph_ingest.store.dlq_index import DlqQuery

HEX_BYTES_PER_LINE = 16
HEX_LIMIT = 4096
"""Bytes shown as hex at most: a claim-checked plan is small, an inline one can be megabytes."""


def hex_lines(data: bytes | None, limit: int = HEX_LIMIT) -> list[str]:
    """``data`` as an ``xxd``-style dump (offset, hex, printable ASCII), cut at ``limit``."""
    if data is None:
        return []
    lines = []
    for offset in range(0, min(len(data), limit), HEX_BYTES_PER_LINE):
        chunk = data[offset : offset + HEX_BYTES_PER_LINE]
        hex_part = " ".join(f"{b:02x}" for b in chunk).ljust(HEX_BYTES_PER_LINE * 3 - 1)
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{offset:08x}  {hex_part}  {text}")
    if len(data) > limit:
        lines.append(f"… {len(data) - limit} more bytes")
    return lines


def utf8_or_none(data: bytes | None) -> str | None:
    """``data`` as text when it is UTF-8 (a key ``space/document``), else None."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def header_text(value: bytes | None) -> str:
    """A header's value as text when it is UTF-8, else as hex; ``-`` for none."""
    if value is None:
        return "-"
    text = utf8_or_none(value)
    return text if text is not None else "hex:" + value.hex()


@dataclass(frozen=True, slots=True)
class TimelineStep:
    """One step of an operation's history as a row of its timeline."""

    sequence: int
    stage: Stage
    at: datetime
    attempts: int
    after_s: float | None
    """Seconds since the previous step (None for the first)."""
    retried_in_place: bool
    """The stage unchanged and one more attempt: a failure waited out where it was."""
    error: ErrorInfo | None = None
    """The failure this step recorded (its error and trace ids); None if it recorded none."""


def timeline(transitions: tuple[Transition, ...]) -> list[TimelineStep]:
    steps = []
    previous: Transition | None = None
    for step, error in zip(transitions, recorded_errors(transitions), strict=True):
        steps.append(
            TimelineStep(
                sequence=step.sequence,
                stage=step.stage,
                at=step.at,
                attempts=step.attempts,
                after_s=None if previous is None else (step.at - previous.at).total_seconds(),
                retried_in_place=previous is not None
                and previous.stage is step.stage
                and step.attempts > previous.attempts,
                error=error,
            )
        )
        previous = step
    return steps


E = TypeVar("E", bound=StrEnum)


def _choice(params: Mapping[str, str], name: str, kind: type[E]) -> E | None:
    value = params.get(name, "").strip().upper()
    if not value:
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise InvalidQuery(f"{name} must be one of {allowed}, not {value!r}") from None


def _text(params: Mapping[str, str], name: str) -> str | None:
    return params.get(name, "").strip() or None


def operation_filter(params: Mapping[str, str]) -> OperationFilter:
    """The operations list's filter from its query string; InvalidQuery names a bad value."""
    return OperationFilter(
        stage=_choice(params, "stage", Stage),
        space=_text(params, "space"),
        document=_text(params, "document"),
        error_code=_choice(params, "error_code", StatusCode),
    )


DLQ_PAGE = 100


def dlq_query(params: Mapping[str, str]) -> DlqQuery:
    """The DLQ list's filter from its query string (oldest first, one page, after its
    ``cursor``: a keyset position ``encode_keyset`` gave out)."""
    cursor = _text(params, "cursor")
    return DlqQuery(
        status=_choice(params, "status", DlqStatus),
        code=_choice(params, "code", StatusCode),
        space=_text(params, "space"),
        document_id=_text(params, "document"),
        limit=DLQ_PAGE,
        after=decode_cursor(cursor) if cursor else None,
    )


__all__ = [
    "DLQ_PAGE",
    "HEX_LIMIT",
    "TimelineStep",
    "dlq_query",
    "header_text",
    "hex_lines",
    "operation_filter",
    "timeline",
    "utf8_or_none",
]
