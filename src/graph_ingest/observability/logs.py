"""How every command logs: one handler on stderr, text or JSON lines, secrets masked, the Kafka
client's chatter de-duplicated, and each record stamped with the worker and the work it is about.

Levels: WARNING by default, so one-shot commands stay quiet; ``-v`` INFO, ``-vv`` DEBUG;
``GRAPH_INGEST_LOG__LEVEL`` over both. A worker command (:func:`worker_verbosity`) lifts our own
loggers (``graph_ingest.*``) to INFO, so a worker says at the default verbosity that it started,
what it was assigned and that it stopped, while third-party libraries stay at WARNING.

``--log-format json`` (``GRAPH_INGEST_LOG__FORMAT``) writes one object per line::

    {"time": "2026-12-02T10:31:44.123Z", "level": "INFO", "logger": "graph_ingest.…",
     "message": "…", "worker_id": "applier-0", "trace_id": "…", "operation_id": "…"}

``worker_id`` (and ``kind``) come from :func:`bind_worker`, which a worker command calls once;
``trace_id`` and ``operation_id`` from the record's ``extra=`` or, around a block of work, from
:func:`log_context`; ``exception`` when the record carries one.

librdkafka's own lines reach Python logging through the ``logger`` entry of every client's
configuration (``KafkaSettings.common_config``); confluent-kafka maps its syslog levels (0-2
CRITICAL, 3 ERROR, 4 WARNING, 5-6 INFO, 7 DEBUG). They, and the client errors logged on the same
logger, pass through :class:`~graph_ingest.observability.log_dedupe.Deduplicate`.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from graph_ingest.observability.log_dedupe import Deduplicate
from graph_ingest.observability.redaction import Redactor
from graph_ingest.settings.kafka import KAFKA_CLIENT_LOGGER
from graph_ingest.settings.logs import LogSettings

CONTEXT_FIELDS = ("worker_id", "kind", "trace_id", "operation_id")
"""The record attributes the JSON lines carry when a record has them."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_process_fields: dict[str, str] = {}
_work_fields: ContextVar[Mapping[str, str] | None] = ContextVar(
    "graph_ingest_log_fields", default=None
)
redactor = Redactor()
"""The process's redactor: ``cli.config.load_settings`` adds the settings' secrets to it."""


def bind_worker(*, kind: str, worker_id: str) -> None:
    """Stamp every later record of this process with the worker it belongs to."""
    _process_fields.update(kind=kind, worker_id=worker_id)


@contextmanager
def log_context(**fields: str | None) -> Iterator[None]:
    """Stamp the records logged inside the block (this thread) with ``fields`` (the None ones
    are left out), e.g. ``trace_id`` and ``operation_id``."""
    outer = _work_fields.get() or {}
    token = _work_fields.set({**outer, **{k: v for k, v in fields.items() if v}})
    try:
        yield
    finally:
        _work_fields.reset(token)


class StampContext(logging.Filter):
    """Sets the context fields a record lacks from the worker and the enclosing :func:`log_context`."""

    def filter(self, record: logging.LogRecord) -> bool:
        for fields in (_work_fields.get() or {}, _process_fields):
            for name, value in fields.items():
                if getattr(record, name, None) is None:
                    setattr(record, name, value)
        return True


class TextFormatter(logging.Formatter):
    """The classic line, secrets masked (the exception text included)."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__(TEXT_FORMAT)
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line; secrets masked."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self._redact(record.getMessage()),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = str(value)
        if record.exc_info:
            line["exception"] = self._redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = self._redact(record.exc_text)
        if record.stack_info:
            line["stack"] = self._redact(record.stack_info)
        return orjson.dumps(line).decode()


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is at the time of each record."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def formatter(log_format: str, redact: Redactor) -> logging.Formatter:
    return JsonFormatter(redact) if log_format == "json" else TextFormatter(redact)


class _Installed:
    """What :func:`configure_logging` installed in this process."""

    explicit_level = False
    dedupe: Deduplicate | None = None


def configure_logging(settings: LogSettings, verbosity: int = 0) -> bool:
    """Install the handler for this process (a later call replaces it). Leaves logging alone
    when someone else (a test runner, an embedding application) has configured it; returns
    whether it configured it."""
    root = logging.getLogger()
    if any(not isinstance(handler, StderrHandler) for handler in root.handlers):
        return False
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = StderrHandler()
    handler.setFormatter(formatter(settings.format, redactor))
    handler.addFilter(StampContext())
    root.addHandler(handler)
    logging.captureWarnings(True)  # a library's warning is a record too, not a raw stderr line
    root.setLevel(settings.level or _level_of(verbosity))
    logging.getLogger("graph_ingest").setLevel(logging.NOTSET)
    _Installed.explicit_level = settings.level is not None
    _deduplicate_kafka_client(settings.kafka_dedupe_interval_s)
    return True


def worker_verbosity() -> None:
    """A worker's own lines at INFO at least (when logging is ours and no level was set)."""
    root = logging.getLogger()
    ours = bool(root.handlers) and all(isinstance(h, StderrHandler) for h in root.handlers)
    if ours and not _Installed.explicit_level and root.level > logging.INFO:
        logging.getLogger("graph_ingest").setLevel(logging.INFO)


def _level_of(verbosity: int) -> int:
    return logging.WARNING - 10 * min(verbosity, 2)


def _deduplicate_kafka_client(interval_s: float) -> None:
    client = logging.getLogger(KAFKA_CLIENT_LOGGER)
    if _Installed.dedupe is not None:
        client.removeFilter(_Installed.dedupe)
    dedupe = _Installed.dedupe = Deduplicate(interval_s)
    client.addFilter(dedupe)
    if interval_s > 0:
        _sweep_every(dedupe, interval_s)


def _sweep_every(dedupe: Deduplicate, interval_s: float) -> None:
    """Report the counts of repeats as intervals end, even when no new record comes; and the
    last ones at exit."""
    period = max(interval_s / 4, 0.5)

    def sweep() -> None:
        while dedupe is _Installed.dedupe:
            time.sleep(period)
            dedupe.sweep()

    threading.Thread(target=sweep, name="log-dedupe", daemon=True).start()
    atexit.register(dedupe.sweep, final=True)


__all__ = [
    "CONTEXT_FIELDS",
    "JsonFormatter",
    "StampContext",
    "TextFormatter",
    "bind_worker",
    "configure_logging",
    "formatter",
    "log_context",
    "redactor",
    "worker_verbosity",
]
