"""Base class for immutable domain values, and the uniqueness check they share."""

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False, allow_inf_nan=False)


def reject_duplicates(what: str, identities: Iterable[str]) -> None:
    """Raise ValueError (a ValidationError inside a validator) naming repeated identities."""
    listed = list(identities)
    if len(set(listed)) < len(listed):  # counted only then: this runs for every decoded plan
        repeated = sorted(i for i, n in Counter(listed).items() if n > 1)
        raise ValueError(f"duplicate {what} identities: {repeated[:5]}")
