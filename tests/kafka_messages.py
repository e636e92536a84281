"""Helpers for tests that read Kafka messages."""

from confluent_kafka import Message


def message_fields(message: Message) -> tuple[bytes, bytes, dict[str, bytes]]:
    """(key, value, headers) of a consumed message, typed."""
    key, value, raw = message.key(), message.value(), message.headers() or []
    assert isinstance(key, bytes) and isinstance(value, bytes)
    items = raw.items() if isinstance(raw, dict) else raw
    return key, value, {k: v for k, v in items if isinstance(v, bytes)}
