"""The plan message: a frozen plan on the plans topic, inline or as a claim-check reference.

Every publisher of plan bytes (the planner, resume and recover, DLQ replay, the release of parked
plans, ``graph-ingest publish-plan``) builds its message here, so that a plan is verified, keyed
``space/document_id`` (all plans of a document share a partition) and headed the same way
whichever path sends it, and one too large for the topic goes as a claim-check reference.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.plan import IngestionPlan
from graph_ingest.schemas import headers as kafka_headers
from graph_ingest.schemas.claim_check import (
    CLAIM_CHECK_CONTENT_TYPE,
    CLAIM_CHECK_VERSION,
    ClaimReference,
    PlanClaim,
)
from graph_ingest.schemas.codec import encode_plan
from graph_ingest.schemas.errors import PlanPublishError
from graph_ingest.schemas.messages import OutboxMessage, message_size

logger = logging.getLogger(__name__)

PLAN_CONTENT_TYPE = "application/vnd.graph-ingest.plan+avro;v=1"


def plan_message(
    plan: IngestionPlan,
    topic: str,
    *,
    value: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    claim: ClaimReference | None = None,
) -> OutboxMessage:
    """The Kafka message of a plan (also usable as an outbox row): verified, encoded, keyed.

    ``value`` may pass already-encoded bytes of this plan (e.g. the stored frozen plan) to avoid
    re-encoding. ``headers`` are added to the plan's own (which they cannot replace). ``claim``:
    the plan is stored in PostgreSQL (``schemas.claim_check``); the message carries this
    reference instead of the plan.
    """
    try:
        plan.verify_fingerprint()
    except GraphIngestError as exc:
        raise PlanPublishError(
            f"refusing to publish plan {plan.operation_id}: {exc}", code=exc.code
        ) from exc
    own = {
        kafka_headers.OPERATION_ID: plan.operation_id,
        kafka_headers.FINGERPRINT: plan.fingerprint,
        kafka_headers.CONTENT_TYPE: PLAN_CONTENT_TYPE,
    }
    if claim is not None:
        if claim.key != (plan.operation_id, plan.fingerprint):
            raise PlanPublishError(
                f"claim check {claim.key} does not name plan {plan.operation_id}"
            )
        value = claim.encode()
        own[kafka_headers.CONTENT_TYPE] = CLAIM_CHECK_CONTENT_TYPE
        own[kafka_headers.CLAIM_CHECK] = CLAIM_CHECK_VERSION
    return OutboxMessage(
        topic=topic,
        key=plan.key.encode("utf-8"),
        value=encode_plan(plan) if value is None else value,
        headers={**(headers or {}), **own},
        operation_id=plan.operation_id,
    )


def sized_plan_message(
    plan: IngestionPlan,
    topic: str,
    *,
    value: bytes,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
) -> tuple[OutboxMessage, PlanClaim | None]:
    """The message that sends the plan encoded as ``value`` to ``topic``: the plan itself when
    the message fits ``max_bytes`` (``topics.max_message_bytes``), else a claim-check reference
    and the claim to store (first writer wins) before the message is published.

    Every publisher of plan bytes decides here: the planner, resume and recover, DLQ replay and
    the release of parked plans."""
    message = plan_message(plan, topic, value=value, headers=headers)
    if message_size(message) <= max_bytes:
        return message, None
    reference = ClaimReference(plan.operation_id, plan.fingerprint, len(value))
    logger.info(
        "%s plan op=%s is %d bytes, over %d: sent as a claim-check reference",
        topic,
        plan.operation_id,
        len(value),
        max_bytes,
    )
    return (
        plan_message(plan, topic, headers=headers, claim=reference),
        PlanClaim(plan.operation_id, plan.fingerprint, value),
    )


__all__ = ["PLAN_CONTENT_TYPE", "plan_message", "sized_plan_message"]
