"""Base class for immutable domain values, and the uniqueness check they share."""

from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

Identity = TypeVar("Identity", bound=Hashable)


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False, allow_inf_nan=False)


def reject_duplicates(
    what: str, identities: Iterable[Identity], shown: Callable[[Identity], str] = str
) -> None:
    """Raise ValueError (a ValidationError inside a validator) naming repeated identities, each
    as ``shown`` prints it. Compared as given, not as printed: ids may hold any character, so
    two different edges can print alike."""
    listed = list(identities)
    if len(set(listed)) < len(listed):  # counted only then: this runs for every decoded plan
        repeated = sorted(shown(i) for i, n in Counter(listed).items() if n > 1)
        raise ValueError(f"duplicate {what} identities: {repeated[:5]}")
