"""The audit of operator actions: every replay, purge, redrive start and cancel, and forced breaker
change is recorded with who, when, what and why, by one call: :meth:`Audit.record`."""

from __future__ import annotations

import getpass
import socket
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from graph_ingest.dlq.errors import DlqError
from graph_ingest.domain.status import StatusCode
from graph_ingest.store.audit import AuditEntry, AuditLog, AuditQuery, AuditRecord


class AuditAction(StrEnum):
    DLQ_REPLAY = "dlq.replay"
    DLQ_PURGE = "dlq.purge"
    REDRIVE_START = "dlq.redrive.start"
    REDRIVE_CANCEL = "dlq.redrive.cancel"
    BREAKER_FORCE_OPEN = "breaker.force-open"
    BREAKER_FORCE_CLOSE = "breaker.force-close"
    BREAKER_RELEASE = "breaker.release"


class MissingReason(DlqError):
    """An action that must say why was asked without a reason."""

    code = StatusCode.INVALID_ARGUMENT


REASON_REQUIRED = frozenset({AuditAction.DLQ_PURGE})


def required_reason(action: AuditAction, reason: str | None) -> str | None:
    """``reason`` stripped (None when blank); MissingReason when ``action`` must say why. A
    service calls it before acting, so a change without its reason is refused before it is made."""
    why = reason.strip() if reason and reason.strip() else None
    if why is None and action in REASON_REQUIRED:
        raise MissingReason(f"{action} needs a reason: say why (--reason / reason)")
    return why


def local_actor() -> str:
    """Who runs the CLI when ``--by`` does not say: ``$USER@host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a bare container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


class Audit:
    """Records operator actions in the audit log (``store``)."""

    def __init__(self, store: AuditLog) -> None:
        self._store = store

    def record(
        self,
        *,
        action: AuditAction,
        by: str,
        target: Iterable[str],
        reason: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> AuditEntry:
        """Record that ``by`` did ``action`` to ``target`` (ids, a dependency name) because of
        ``reason``; ``details``: the rest of what was asked (JSON-able). A purge needs a
        reason (MissingReason)."""
        why = required_reason(action, reason)
        actor = by.strip() or local_actor()
        return self._store.append_audit(
            AuditRecord(
                actor=actor,
                action=action.value,
                target=tuple(target),
                reason=why,
                details=dict(details or {}),
            )
        )

    def entries(self, query: AuditQuery) -> list[AuditEntry]:
        return self._store.list_audit(query)


def audit_entry_json(entry: AuditEntry) -> dict[str, Any]:
    record = entry.record
    return {
        "audit_id": entry.audit_id,
        "at": entry.at.isoformat(),
        "by": record.actor,
        "action": record.action,
        "target": list(record.target),
        "reason": record.reason,
        "details": record.details,
    }


__all__ = [
    "Audit",
    "AuditAction",
    "MissingReason",
    "audit_entry_json",
    "local_actor",
    "required_reason",
]
