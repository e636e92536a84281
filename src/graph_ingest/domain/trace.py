"""W3C Trace Context ``traceparent`` values (https://www.w3.org/TR/trace-context/), pure.

``00-<trace id: 32 hex>-<parent id: 16 hex>-<flags: 2 hex>``. The trace id names one plan's whole
journey: taken from the producer's ``traceparent`` when it sent one, else created at first
consumption, then carried on every retry-tier, DLQ and replay copy, so every failure record of
that journey can be found by it. Header names and reading them from a message are in
:mod:`graph_ingest.schemas.headers`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

VERSION = "00"
SAMPLED = 0x01

_TRACEPARENT = re.compile(
    r"(?P<version>[0-9a-f]{2})-(?P<trace_id>[0-9a-f]{32})-(?P<parent_id>[0-9a-f]{16})"
    r"-(?P<flags>[0-9a-f]{2})(?P<rest>-.*)?"
)
_TRACE_ID = re.compile(r"[0-9a-f]{32}")


class InvalidTraceparent(ValueError):
    """A ``traceparent`` value the specification says to ignore (then start a new trace)."""


@dataclass(frozen=True, slots=True)
class TraceParent:
    trace_id: str
    parent_id: str
    flags: int = SAMPLED

    @classmethod
    def new(cls, trace_id: str | None = None) -> TraceParent:
        """A fresh span of ``trace_id`` (a new trace when None), sampled."""
        return cls(trace_id=trace_id or new_trace_id(), parent_id=new_parent_id())

    def header_value(self) -> str:
        return f"{VERSION}-{self.trace_id}-{self.parent_id}-{self.flags:02x}"


def parse_traceparent(value: str) -> TraceParent:
    """Parse a ``traceparent`` value; raise InvalidTraceparent for anything the spec rejects.

    Version ``00`` must have exactly four fields; a higher version may append fields after the
    flags (read as version 00, as the spec asks); version ``ff`` and all-zero ids are invalid."""
    match = _TRACEPARENT.fullmatch(value.strip(" \t"))
    if match is None:
        raise InvalidTraceparent(f"not a traceparent: {value[:80]!r}")
    if match["version"] == "ff":
        raise InvalidTraceparent("traceparent version ff is invalid")
    if match["version"] == VERSION and match["rest"] is not None:
        raise InvalidTraceparent("traceparent version 00 has exactly four fields")
    if set(match["trace_id"]) == {"0"}:
        raise InvalidTraceparent("traceparent trace id is all zeros")
    if set(match["parent_id"]) == {"0"}:
        raise InvalidTraceparent("traceparent parent id is all zeros")
    return TraceParent(
        trace_id=match["trace_id"], parent_id=match["parent_id"], flags=int(match["flags"], 16)
    )


def new_trace_id() -> str:
    return secrets.token_hex(16)


def new_parent_id() -> str:
    return secrets.token_hex(8)


def check_trace_id(value: str) -> str:
    """``value`` if it is a valid trace id (32 lower-case hex, not all zeros), else ValueError."""
    if _TRACE_ID.fullmatch(value) is None or set(value) == {"0"}:
        raise ValueError(f"not a trace id (32 lower-case hex digits, not all zero): {value[:40]!r}")
    return value


TraceId = Annotated[str, AfterValidator(check_trace_id)]
