"""Identifier validation: the only guard between plan content and Cypher text.

Labels, edge types, property names and spaces are interpolated into Cypher (Neo4j cannot
parameterise them), so every one must match IDENTIFIER_PATTERN before it gets near a query.
"""

import re
from typing import Annotated

from pydantic import Field

from graph_ingest.domain.errors import InvalidIdentifier

IDENTIFIER_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_IDENTIFIER_LENGTH = 128


def is_identifier(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= MAX_IDENTIFIER_LENGTH
        and IDENTIFIER_PATTERN.fullmatch(value) is not None
    )


def validate_identifier(value: str, *, what: str = "identifier") -> str:
    """Return ``value`` unchanged if it is a safe identifier, else raise InvalidIdentifier."""
    if not is_identifier(value):
        raise InvalidIdentifier(
            f"invalid {what} {value!r}: must match {IDENTIFIER_PATTERN.pattern} "
            f"and be at most {MAX_IDENTIFIER_LENGTH} characters"
        )
    return value


# The same rule as validate_identifier, checked by pydantic-core's Rust regex: plans carry dozens
# of identifiers each (labels, types, property names) and every consumed plan is validated again.
Identifier = Annotated[
    str, Field(max_length=MAX_IDENTIFIER_LENGTH, pattern=rf"^{IDENTIFIER_PATTERN.pattern}$")
]
