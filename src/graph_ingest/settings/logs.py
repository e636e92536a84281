"""Logging settings (``GRAPH_INGEST_LOG__*``): the output format, an explicit level, and how often
a repeated Kafka client message is let through."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from graph_ingest.settings.section import Section

LogFormat = Literal["text", "json"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class LogSettings(Section):
    format: LogFormat = Field(
        default="text",
        description="text: one line per record; json: one JSON object per line (time, level, "
        "logger, message, worker_id, trace_id and operation_id when known, exception)",
    )
    level: LogLevel | None = Field(
        default=None,
        description="the level of every logger, over -v/-vv and the defaults (WARNING; a "
        "worker's own lifecycle lines at INFO)",
    )
    kafka_dedupe_interval_s: float = Field(
        default=60.0,
        ge=0,
        description="a Kafka client message (librdkafka's lines, client errors) is logged once "
        "per interval per distinct text (numbers ignored); the repeats are counted and the count "
        "logged when the interval ends. 0: every one",
    )
