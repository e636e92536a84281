"""Base class for immutable domain values."""

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False, allow_inf_nan=False)
