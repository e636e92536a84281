"""The one place a confluent-kafka consumer is created: a configuration the client refuses
becomes our error, naming what the consumer was for (no broker needed)."""

import pytest

from graph_ingest.kafka.consumer import open_consumer
from graph_ingest.kafka.errors import KafkaIngestError


def test_a_refused_configuration_raises_our_error_with_its_context() -> None:
    with pytest.raises(KafkaIngestError, match="reading plans"):
        open_consumer({"no.such.property": "x", "group.id": "g"}, context="reading plans")


def test_a_valid_configuration_opens_a_consumer_without_touching_the_network() -> None:
    consumer = open_consumer(
        {"bootstrap.servers": "localhost:1", "group.id": "g"}, context="reading plans"
    )
    consumer.close()
