"""The audit log port: who did what to the DLQ and the breakers, when and why. Append only."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class AuditRecord:
    actor: str
    """Who: an API token's name, or the CLI's ``--by`` (default ``$USER@host``)."""
    action: str
    target: tuple[str, ...]
    """What it acted on: DLQ ids, a task id, a dependency."""
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    """The rest of what was asked (a filter, a rate, force)."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    audit_id: int
    at: datetime
    record: AuditRecord


@dataclass(frozen=True, slots=True)
class AuditQuery:
    since: datetime | None = None
    action: str | None = None
    limit: int = 100


class AuditLog(Protocol):
    def append_audit(self, record: AuditRecord) -> AuditEntry: ...

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]:
        """The entries ``query`` selects, oldest first, the newest ``query.limit`` of them."""
        ...


__all__ = ["AuditEntry", "AuditLog", "AuditQuery", "AuditRecord"]
