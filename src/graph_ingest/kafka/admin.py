"""Topic administration: create the pipeline's topics idempotently and check existing ones.

Existing topics are never altered. A setting the pipeline cannot work with (an operation log that is
not compacted) raises :class:`TopicMismatch` naming the fix; a softer difference (fewer partitions,
another segment roll time) is a warning in the :class:`TopicReport`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in its __all__
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from graph_ingest.kafka.errors import KafkaUnavailable, TopicMismatch, translate_kafka_error
from graph_ingest.settings import Settings
from graph_ingest.settings.kafka import TopicSettings

logger = logging.getLogger(__name__)

DEFAULT_ADMIN_TIMEOUT_S = 30.0
_METADATA_POLL_S = 0.1


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic as the pipeline wants it.

    ``config`` is applied at creation. On an existing topic, a differing value of a key in
    ``required`` is an error (the pipeline would misbehave); of any other ``config`` key, a warning.
    """

    name: str
    partitions: int
    replication_factor: int = 1
    config: Mapping[str, str] = field(default_factory=dict)
    required: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class TopicReport:
    name: str
    created: bool
    partitions: int
    replication_factor: int
    warnings: tuple[str, ...] = ()

    def __str__(self) -> str:
        what = "created" if self.created else "exists"
        text = f"{self.name}: {what}, {self.partitions} partitions, replication {self.replication_factor}"
        return text + "".join(f"\n  warning: {w}" for w in self.warnings)


def topic_specs(topics: TopicSettings) -> list[TopicSpec]:
    """The pipeline's topics as configured: ingest requests and plans (both key =
    space/documentId, refusing messages past ``max_message_bytes``), the compacted
    operation log (key = operationId), the retry tiers and the dead-letter queue (keyed like the
    plans, with as many partitions, so a document's copies stay on one partition; the DLQ keeps
    its messages until they are purged on purpose), the workers' degradation events (key =
    worker id, the broker's default retention), and the compacted breaker controls (key =
    dependency; one partition: a handful of keys that every worker reads whole)."""
    keyed_like_plans = [
        *(name for name, _ in topics.retry_tiers),
        topics.dlq,
    ]
    return [
        TopicSpec(
            name=topics.requests,
            partitions=topics.request_partitions,
            replication_factor=topics.replication_factor,
            config={"max.message.bytes": str(topics.max_message_bytes)},
        ),
        TopicSpec(
            name=topics.plans,
            partitions=topics.plan_partitions,
            replication_factor=topics.replication_factor,
        ),
        TopicSpec(
            name=topics.operations,
            partitions=topics.operation_partitions,
            replication_factor=topics.replication_factor,
            config={
                "cleanup.policy": "compact",
                "segment.ms": str(topics.operations_segment_ms),
                "min.compaction.lag.ms": str(topics.operations_min_compaction_lag_ms),
            },
            required=frozenset({"cleanup.policy"}),
        ),
        *(
            TopicSpec(
                name=name,
                partitions=topics.plan_partitions,
                replication_factor=topics.replication_factor,
                config={"retention.ms": "-1"} if name == topics.dlq else {},
            )
            for name in keyed_like_plans
        ),
        TopicSpec(
            name=topics.degradation,
            partitions=topics.degradation_partitions,
            replication_factor=topics.replication_factor,
        ),
        control_topic_spec(topics),
    ]


def control_topic_spec(topics: TopicSettings) -> TopicSpec:
    """The breaker controls' topic: compacted (the latest word per dependency is all a worker
    needs), one partition."""
    return TopicSpec(
        name=topics.control,
        partitions=1,
        replication_factor=topics.replication_factor,
        config={"cleanup.policy": "compact"},
        required=frozenset({"cleanup.policy"}),
    )


def pipeline_topics(topics: TopicSettings) -> list[str]:
    """The names of every topic ``topics create`` makes."""
    return [spec.name for spec in topic_specs(topics)]


def ensure_topics(
    settings: Settings, *, timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S
) -> list[TopicReport]:
    """Create the pipeline's topics from ``settings.topics`` if absent; check them if present."""
    return create_topics(settings, topic_specs(settings.topics), timeout_s=timeout_s)


def _admin(settings: Settings) -> Any:
    try:
        # librdkafka's log lines go through Python logging (common_config's logger), not stderr.
        return AdminClient(settings.kafka.common_config())
    except (KafkaException, ValueError, TypeError) as exc:
        raise translate_kafka_error(exc, context="creating the Kafka admin client") from exc


def _metadata(admin: Any, timeout_s: float, topic: str | None = None) -> Any:
    try:
        return admin.list_topics(topic=topic, timeout=timeout_s)
    except KafkaException as exc:
        raise translate_kafka_error(exc, context="reading Kafka cluster metadata") from exc


def create_topics(
    settings: Settings, specs: Sequence[TopicSpec], *, timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S
) -> list[TopicReport]:
    """Create the absent topics of ``specs``, wait until they have leaders, and check the others.

    Returns one report per spec, in order. Raises :class:`TopicMismatch` (listing every problem and
    its fix) if an existing topic violates a ``required`` setting.
    """
    admin = _admin(settings)
    deadline = time.monotonic() + timeout_s
    existing = set(_metadata(admin, timeout_s).topics)
    missing = [s for s in specs if s.name not in existing]
    created = _create_missing(admin, missing, timeout_s)
    if missing:  # created here, or concurrently by someone else
        _wait_for_leaders(admin, missing, deadline)

    metadata = _metadata(admin, max(1.0, deadline - time.monotonic()))
    to_check = [s for s in specs if s.name not in created]
    configs = _describe(admin, [s.name for s in to_check if s.config], timeout_s)
    reports: list[TopicReport] = []
    errors: list[str] = []
    for spec in specs:
        partitions, replication = _shape(metadata.topics[spec.name])
        if spec.name in created:
            logger.info("kafka topic %s created (%d partitions)", spec.name, partitions)
            reports.append(TopicReport(spec.name, True, partitions, replication))
            continue
        warnings = _check_existing(
            settings, spec, partitions, replication, configs.get(spec.name, {}), errors
        )
        for warning in warnings:
            logger.warning("kafka topic %s: %s", spec.name, warning)
        reports.append(TopicReport(spec.name, False, partitions, replication, tuple(warnings)))
    if errors:
        raise TopicMismatch("existing topics cannot be used as they are:\n" + "\n".join(errors))
    return reports


def _create_missing(admin: Any, specs: Sequence[TopicSpec], timeout_s: float) -> set[str]:
    if not specs:
        return set()
    new_topics = [
        NewTopic(
            s.name,
            num_partitions=s.partitions,
            replication_factor=s.replication_factor,
            config=dict(s.config),
        )
        for s in specs
    ]
    futures = admin.create_topics(
        new_topics, operation_timeout=timeout_s, request_timeout=timeout_s
    )
    created: set[str] = set()
    for name, future in futures.items():
        try:
            future.result()
            created.add(name)
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue  # created concurrently by someone else: check it like any existing topic
            raise translate_kafka_error(exc, context=f"creating topic {name}") from exc
    return created


def _wait_for_leaders(admin: Any, specs: Sequence[TopicSpec], deadline: float) -> None:
    """A created topic is usable once every partition has a leader in the metadata."""
    waiting = {s.name: s.partitions for s in specs}
    while waiting:
        metadata = _metadata(admin, max(1.0, deadline - time.monotonic()))
        for name, count in list(waiting.items()):
            topic = metadata.topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) >= count
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                del waiting[name]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise KafkaUnavailable(
                f"created topics have no partition leaders yet: {sorted(waiting)}"
            )
        time.sleep(_METADATA_POLL_S)


def _shape(topic: Any) -> tuple[int, int]:
    partitions = topic.partitions
    replication = min((len(p.replicas) for p in partitions.values()), default=0)
    return len(partitions), replication


def _describe(admin: Any, names: Iterable[str], timeout_s: float) -> dict[str, dict[str, str]]:
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    if not resources:
        return {}
    futures = admin.describe_configs(resources, request_timeout=timeout_s)
    out: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        try:
            entries = future.result()
        except KafkaException as exc:
            raise translate_kafka_error(exc, context=f"describing topic {resource.name}") from exc
        out[resource.name] = {k: e.value for k, e in entries.items() if e.value is not None}
    return out


def topic_config(
    settings: Settings, name: str, *, timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S
) -> dict[str, str]:
    """The effective configuration of one topic (defaults included)."""
    return _describe(_admin(settings), [name], timeout_s)[name]


def _check_existing(
    settings: Settings,
    spec: TopicSpec,
    partitions: int,
    replication: int,
    config: Mapping[str, str],
    errors: list[str],
) -> list[str]:
    warnings: list[str] = []
    if partitions < spec.partitions:
        warnings.append(
            f"has {partitions} partitions, {spec.partitions} configured: fewer consumers can work "
            f"in parallel (adding partitions moves keys, so only do it on an empty topic)"
        )
    if replication < spec.replication_factor:
        warnings.append(
            f"replication factor {replication} is below the configured {spec.replication_factor}"
        )
    for key, wanted in spec.config.items():
        actual = config.get(key)
        if actual == wanted:
            continue
        if key in spec.required:
            errors.append(
                f"topic {spec.name} has {key}={actual}, the pipeline needs {key}={wanted}. Fix: "
                f"kafka-configs.sh --bootstrap-server {settings.kafka.bootstrap_servers} --alter "
                f"--entity-type topics --entity-name {spec.name} --add-config {key}={wanted}"
            )
        else:
            warnings.append(f"has {key}={actual}, {wanted} configured")
    return warnings


def delete_topics(
    settings: Settings, names: Sequence[str], *, timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S
) -> None:
    """Delete topics (test clean-up); topics that do not exist are ignored."""
    if not names:
        return
    admin = _admin(settings)
    futures = admin.delete_topics(
        list(names), operation_timeout=timeout_s, request_timeout=timeout_s
    )
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise translate_kafka_error(exc, context=f"deleting topic {name}") from exc
