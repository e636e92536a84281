"""Forcing a breaker from an operator's seat (CLI or API): the control record for every worker,
then the audit entry that says who did it and why."""

from __future__ import annotations

from graph_ingest.dlq.audit import Audit, AuditAction
from graph_ingest.domain.breaker_control import BreakerControl, BreakerMode
from graph_ingest.producers.breaker_control import force
from graph_ingest.settings import Settings

AUDITED_AS = {
    BreakerMode.FORCED_OPEN: AuditAction.BREAKER_FORCE_OPEN,
    BreakerMode.FORCED_CLOSED: AuditAction.BREAKER_FORCE_CLOSE,
    BreakerMode.AUTOMATIC: AuditAction.BREAKER_RELEASE,
}


def force_breaker(
    settings: Settings, audit: Audit, dependency: str, mode: BreakerMode, *, by: str, reason: str
) -> BreakerControl:
    """Publish ``mode`` for ``dependency`` (every worker obeys within seconds), then audit it;
    the audit follows the publish so it never records a change that was not made."""
    control = force(settings, dependency, mode, by=by, reason=reason)
    audit.record(
        action=AUDITED_AS[mode],
        by=by,
        target=[dependency],
        reason=reason or None,
        details={"mode": mode.value},
    )
    return control


__all__ = ["AUDITED_AS", "force_breaker"]
