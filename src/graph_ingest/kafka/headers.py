"""Read a consumed confluent-kafka message's headers into the pairs ``schemas.headers`` reads.

The header names and every helper that needs no Kafka client live in ``schemas.headers`` (the
wire); this is the one step that touches confluent-kafka's ``Message``.
"""

from __future__ import annotations

from confluent_kafka import Message

from graph_ingest.schemas.headers import MessageHeaders


def headers_of(message: Message) -> MessageHeaders:
    """A consumed confluent-kafka message's headers as (name, bytes) pairs, in order, repeats
    included."""
    raw = message.headers() or ()
    pairs = raw.items() if isinstance(raw, dict) else raw
    return tuple(
        (key, value if value is None or isinstance(value, bytes) else str(value).encode())
        for key, value in pairs
    )


__all__ = ["headers_of"]
