"""Log lines: one JSON object per record with the worker and the work it is about, the classic
text line, and secrets masked in both."""

import logging
import sys

import orjson
import pytest

from graph_ingest.consumers.plan_message import PlanMessage
from graph_ingest.observability.logs import (
    JsonFormatter,
    StampContext,
    TextFormatter,
    bind_worker,
    log_context,
)
from graph_ingest.observability.redaction import MASK, Redactor, secrets_of
from graph_ingest.settings import Settings

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.getLogger("graph_ingest.test").makeRecord(
        "graph_ingest.test", logging.WARNING, __file__, 1, message, args, None, extra=extra
    )
    StampContext().filter(made)
    return made


def as_json(made: logging.LogRecord, redact: Redactor | None = None) -> dict[str, object]:
    line = JsonFormatter(redact or Redactor()).format(made)
    assert "\n" not in line
    parsed = orjson.loads(line)
    assert isinstance(parsed, dict)
    return parsed


def test_a_json_line_has_time_level_logger_message_and_the_worker() -> None:
    bind_worker(kind="applier", worker_id="applier-7")
    line = as_json(record("plans %s[%d]", "ingestion.plans", 3))
    assert line["level"] == "WARNING"
    assert line["logger"] == "graph_ingest.test"
    assert line["message"] == "plans ingestion.plans[3]"
    assert line["worker_id"] == "applier-7" and line["kind"] == "applier"
    assert str(line["time"]).startswith("20")
    assert "trace_id" not in line and "operation_id" not in line and "exception" not in line


def test_trace_and_operation_ids_come_from_extra_or_the_enclosing_context() -> None:
    assert as_json(record("x", trace_id=TRACE, operation_id="op-1"))["trace_id"] == TRACE
    with log_context(trace_id=TRACE, operation_id="op-2"):
        inside = as_json(record("y"))
        explicit = as_json(record("z", operation_id="op-3"))
    after = as_json(record("w"))
    assert (inside["trace_id"], inside["operation_id"]) == (TRACE, "op-2")
    assert explicit["operation_id"] == "op-3"
    assert "trace_id" not in after and "operation_id" not in after


def test_the_exception_is_one_field_of_the_same_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        made = logging.getLogger("t").makeRecord(
            "t", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    line = as_json(made)
    assert "ValueError: boom" in str(line["exception"])


@pytest.mark.parametrize(
    "text",
    [
        "connect to postgresql://graph:{pw}@db:5432/x failed",
        "conninfo host=db password={pw} dbname=x",
        "config {{'sasl.password': '{pw}', 'bootstrap.servers': 'k:9092'}}",
        'auth {{"password": "{pw}"}}',
        "neo4j auth ('neo4j', '{pw}') refused",
    ],
)
def test_secrets_are_masked_in_text_and_json(text: str) -> None:
    password = "s3cr3t-Pa55"
    redact = Redactor([password])
    made = record(text.format(pw=password))
    written = [TextFormatter(redact).format(made), orjson.dumps(as_json(made, redact)).decode()]
    for line in written:
        assert password not in line
        assert MASK in line


def test_password_shapes_are_masked_without_knowing_the_value() -> None:
    redact = Redactor()
    assert redact("postgresql://u:hunter2@h/db") == f"postgresql://u:{MASK}@h/db"
    assert redact("sasl.password=hunter2 next") == f"sasl.password={MASK} next"
    assert redact("a plain line about 3 plans") == "a plain line about 3 plans"


def test_the_secrets_of_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPH_INGEST_NEO4J__PASSWORD", "neo-pw")
    monkeypatch.setenv("GRAPH_INGEST_POSTGRES__PASSWORD", "pg-pw")
    monkeypatch.setenv(
        "GRAPH_INGEST_KAFKA__EXTRA", '{"sasl.password": "kafka-pw", "sasl.username": "bob"}'
    )
    assert sorted(secrets_of(Settings())) == ["kafka-pw", "neo-pw", "pg-pw"]


def test_a_plan_message_gives_its_records_its_operation_and_trace_ids() -> None:
    message = PlanMessage(
        "ingestion.plans",
        0,
        7,
        b"k",
        b"v",
        operation_id_header="op_1",
        headers=(("traceparent", f"00-{TRACE}-00f067aa0ba902b7-01".encode()),),
    )
    assert message.log_fields() == {"operation_id": "op_1", "trace_id": TRACE}
    line = as_json(record("%s failed", message.context(), **message.log_fields()))
    assert (line["operation_id"], line["trace_id"]) == ("op_1", TRACE)
    assert PlanMessage("ingestion.plans", 0, 8, None, None).log_fields() == {}
