"""The operator tools' settings: re-publishing stranded plans (``GRAPH_INGEST_RECOVERY__*``,
`graph-ingest resume` / `recover`) and the DLQ tools (``GRAPH_INGEST_DLQ__*``)."""

from __future__ import annotations

from pydantic import Field, model_validator

from graph_ingest.settings.section import Section


class RecoverySettings(Section):
    """`graph-ingest resume` / `recover`: re-publishing the frozen plans of stranded operations."""

    older_than_s: float = Field(
        default=300.0,
        ge=0,
        description="recover takes operations whose last change is at least this old (default of"
        " --older-than); younger ones may still be in an applier's hands",
    )
    limit: int = Field(default=100, ge=1, description="operations one recover run claims at most")
    lease_s: float = Field(
        default=300.0,
        gt=0,
        description="how long a claimed operation is not claimed again by another recoverer: time"
        " for the re-published plan to reach an applier",
    )
    publish_timeout_s: float = Field(
        default=30.0, gt=0, description="how long one re-published plan may wait for Kafka's ack"
    )

    @model_validator(mode="after")
    def lease_outlasts_a_publish(self) -> RecoverySettings:
        if self.lease_s <= self.publish_timeout_s:
            raise ValueError(
                f"recovery.lease_s ({self.lease_s:g}) must be longer than"
                f" recovery.publish_timeout_s ({self.publish_timeout_s:g})"
            )
        return self


class DlqSettings(Section):
    """`graph-ingest dlq`: replaying dead-lettered plans and rebuilding the DLQ index."""

    publish_timeout_s: float = Field(
        default=30.0, gt=0, description="how long one replayed plan may wait for Kafka's ack"
    )
    reindex_timeout_s: float = Field(
        default=300.0, gt=0, description="how long `dlq reindex` may take to read the DLQ topic"
    )
