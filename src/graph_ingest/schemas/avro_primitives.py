"""What every Avro writer here shares: the single-object marker, the long's range, and datetimes
as ``timestamp-micros``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from graph_ingest.schemas.errors import EncodeError

MARKER = b"\xc3\x01"
HEADER_SIZE = len(MARKER) + 8
"""The marker, then the writer schema's 8-byte fingerprint."""

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(value: datetime, field: str) -> int:
    """Microseconds since the epoch, exactly; a naive datetime names no instant, so it is refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise EncodeError(f"{field}: naive datetime {value.isoformat()}; give it a time zone")
    return (value - _EPOCH) // _MICROSECOND


def check_long(value: int, field: str) -> None:
    """Refuse an integer an Avro long cannot hold (fastavro would raise, or guess a double)."""
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise EncodeError(f"{field}: integer {value} does not fit in 64 bits")
