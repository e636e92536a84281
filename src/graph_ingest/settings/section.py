"""The base of every settings section: frozen, and strict about unknown keys (a misspelt
variable fails at start-up instead of being ignored)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
