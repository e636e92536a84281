"""Kafka adapters: topic administration, a batch producer, the typed consumer every consumer goes
through (``kafka.consumer``), and the one Kafka error translation."""

from graph_ingest.kafka.admin import (
    TopicReport,
    TopicSpec,
    create_topics,
    delete_topics,
    ensure_topics,
    topic_config,
    topic_specs,
)
from graph_ingest.kafka.errors import (
    KafkaIngestError,
    KafkaUnavailable,
    TopicMismatch,
    translate_kafka_error,
)
from graph_ingest.kafka.producer import KafkaProducer, ProducerMessage

__all__ = [
    "KafkaIngestError",
    "KafkaProducer",
    "KafkaUnavailable",
    "ProducerMessage",
    "TopicMismatch",
    "TopicReport",
    "TopicSpec",
    "create_topics",
    "delete_topics",
    "ensure_topics",
    "topic_config",
    "topic_specs",
    "translate_kafka_error",
]
