"""What the stores can hold, checked when a plan is built or decoded, never first at a commit.

A value PostgreSQL refuses (a NUL character in text or JSON, an integer past a column's range, an
index key past the B-tree row limit) would otherwise surface in the state commit, after the graph
write: the plan would be half applied. The fingerprint's canonical JSON (RFC 8785, I-JSON) holds
integers exactly only within ±(2**53 - 1), so every integer a plan carries stays inside that too.
"""

from typing import Annotated

from pydantic import Field

MAX_SAFE_INTEGER = 2**53 - 1
# Revisions live in PostgreSQL INT columns.
MAX_REVISION = 2**31 - 1
MAX_ID_LENGTH = 512
# A B-tree index row holds at most ~2,700 bytes; keep every composite key well below it.
MAX_INDEX_KEY_BYTES = 2_000
# What a failure record quotes of an error: enough to diagnose, small enough for a Kafka header,
# a log line and a DLQ listing.
MAX_ERROR_MESSAGE_LENGTH = 1_000
MAX_ERROR_CLASS_LENGTH = 200
ELLIPSIS = "…"

NUL = "\x00"
_NO_NUL = r"^[^\x00]*$"

# Text stored in a PostgreSQL TEXT or JSONB column.
StoredText = Annotated[str, Field(pattern=_NO_NUL)]
ErrorMessage = Annotated[str, Field(max_length=MAX_ERROR_MESSAGE_LENGTH, pattern=_NO_NUL)]
ErrorClass = Annotated[str, Field(max_length=MAX_ERROR_CLASS_LENGTH, pattern=_NO_NUL)]
NonEmptyText = Annotated[str, Field(min_length=1, pattern=_NO_NUL)]
# An identity stored in an indexed column.
StoredId = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=_NO_NUL)]
SafeInteger = Annotated[int, Field(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
Offset = Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER)]


def check_index_key(what: str, *parts: str, shown: str) -> None:
    """Raise ValueError when the UTF-8 parts of one index key exceed MAX_INDEX_KEY_BYTES; the
    message names the key as ``what`` and the start of ``shown``.

    Runs for every registration and fact of every decoded plan: a key of at most a quarter of
    the limit in characters fits whatever they are (UTF-8 spends at most 4 bytes on one), so
    only longer keys are encoded to count."""
    if sum(map(len, parts)) * 4 <= MAX_INDEX_KEY_BYTES:
        return
    size = sum(len(part.encode("utf-8")) for part in parts)
    if size > MAX_INDEX_KEY_BYTES:
        raise ValueError(
            f"{what} {shown[:80]!r} is {size} bytes in UTF-8; at most {MAX_INDEX_KEY_BYTES} "
            "can be indexed"
        )


def storable_text(value: str) -> str:
    """Text PostgreSQL (and UTF-8 wire formats) can hold: a NUL, which TEXT refuses, is written as
    the escape ``\\x00``; a lone surrogate, which no UTF-8 encoder accepts, as ``\\udcxx``.

    For what a message or an error says about itself (error messages, header values): recording
    why something failed must never fail because of what it quotes."""
    escaped = value.replace("\x00", "\\x00")
    return escaped.encode("utf-8", "backslashreplace").decode("utf-8")


def bounded_text(value: str, max_length: int) -> str:
    """``value`` made storable and cut to at most ``max_length`` characters, the cut marked with an
    ellipsis (escaping comes first, so the result fits whatever it quoted)."""
    text = storable_text(value)
    if len(text) <= max_length:
        return text
    return text[: max_length - len(ELLIPSIS)] + ELLIPSIS
