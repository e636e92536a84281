"""Identifier validation: the only guard between plan content and Cypher text.

Labels, edge types, property names and spaces are interpolated into Cypher (Neo4j cannot
parameterise them), so every one must match IDENTIFIER_PATTERN before it gets near a query.
"""

import re
from typing import Annotated

from pydantic import AfterValidator

from graph_ingest.domain.errors import InvalidIdentifier

IDENTIFIER_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_IDENTIFIER_LENGTH = 128


def validate_identifier(value: str, *, what: str = "identifier") -> str:
    """Return ``value`` unchanged if it is a safe identifier, else raise InvalidIdentifier."""
    if (
        not isinstance(value, str)
        or len(value) > MAX_IDENTIFIER_LENGTH
        or not IDENTIFIER_PATTERN.fullmatch(value)
    ):
        raise InvalidIdentifier(
            f"invalid {what} {value!r}: must match {IDENTIFIER_PATTERN.pattern} "
            f"and be at most {MAX_IDENTIFIER_LENGTH} characters"
        )
    return value


def model_identifier(value: str, what: str = "identifier") -> str:
    """validate_identifier for pydantic validators, which turn only ValueError into a
    ValidationError (InvalidIdentifier is not one)."""
    try:
        return validate_identifier(value, what=what)
    except InvalidIdentifier as exc:
        raise ValueError(str(exc)) from exc


Identifier = Annotated[str, AfterValidator(model_identifier)]
