"""What the `graph-ingest dlq` commands share: the entry filters, the services they open."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from graph_ingest.cli.params import TIME_EXAMPLE, AwareDateTime, Duration
from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.status import StatusCode
from graph_ingest.settings import Settings
from graph_ingest.store.dlq_index import DlqQuery

if TYPE_CHECKING:  # the commands import lazily: --help stays fast
    from graph_ingest.dlq.audit import Audit
    from graph_ingest.dlq.replayer import DlqReplayer
    from graph_ingest.dlq.tasks import RedriveTasks
    from graph_ingest.store.postgres.store import PostgresOperationStore

F = TypeVar("F", bound=Callable[..., Any])

_CODES = [code.value for code in StatusCode if code is not StatusCode.OK]


_ENTRY_OPTIONS: list[Callable[[Any], Any]] = [
    click.option(
        "--code",
        type=click.Choice(_CODES, case_sensitive=False),
        metavar="CODE",
        help="Only entries whose last failure has this status code, e.g. "
        "FAILED_PRECONDITION, INVALID_ARGUMENT, DATA_LOSS.",
    ),
    click.option("--space", help="Only entries of documents in this space."),
    click.option("--document", "document_id", metavar="ID", help="Only entries of this document."),
    click.option(
        "--older-than",
        "older_than_s",
        type=Duration(),
        metavar="DURATION",
        help="Only entries dead-lettered at least this long ago, e.g. 30s, 5m, 2h.",
    ),
    click.option(
        "--class",
        "error_class",
        metavar="CLASS",
        help="Only entries whose last failure has this error class, e.g. GraphConstraintError.",
    ),
    click.option(
        "--from",
        "dead_lettered_from",
        type=AwareDateTime(),
        help=f"Only entries dead-lettered at or after this time, e.g. {TIME_EXAMPLE}.",
    ),
    click.option(
        "--to",
        "dead_lettered_to",
        type=AwareDateTime(),
        help="Only entries dead-lettered before this time.",
    ),
    click.option(
        "--id",
        "dlq_ids",
        multiple=True,
        metavar="DLQ_ID",
        help="Only this entry (repeat the option for several).",
    ),
]
"""The entry filters shared by `list` and `replay-all`, --limit aside."""


def entry_filters(*, limit_default: int | None, limit_help: str) -> Callable[[F], F]:
    """The entry filters, and --limit with its default and help."""
    limit = click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=limit_default,
        show_default=limit_default is not None,
        help=limit_help,
    )

    def add(command: F) -> F:
        for option in reversed([*_ENTRY_OPTIONS, limit]):
            command = option(command)
        return command

    return add


def dlq_query(status: str | None, code: str | None, limit: int | None, **filters: Any) -> DlqQuery:
    """The options of ``entry_filters`` (and --status) as a query; no --id: every entry."""
    return DlqQuery(
        status=None if status is None else DlqStatus(status.upper()),
        code=None if code is None else StatusCode(code.upper()),
        limit=limit,
        **{**filters, "dlq_ids": tuple(filters.get("dlq_ids") or ()) or None},
    )


def actor_options(command: F) -> F:
    """--by and --reason: who acts and why, recorded in the audit log."""
    command = click.option("--reason", help="Why: kept in the audit log (`graph-ingest audit`).")(
        command
    )
    return click.option(
        "--by",
        default="",
        metavar="NAME",
        help="Who acts, for the audit log [default: $USER@host].",
    )(command)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


@contextmanager
def dlq_store(settings: Settings) -> Iterator[PostgresOperationStore]:
    from graph_ingest.wiring import postgres_store

    store = postgres_store(settings)
    store.start()
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _replaying(
    settings: Settings,
) -> Iterator[tuple[PostgresOperationStore, DlqReplayer, Audit]]:
    from graph_ingest.dlq.audit import Audit
    from graph_ingest.dlq.replayer import DlqReplayer
    from graph_ingest.kafka.producer import KafkaProducer

    producer = KafkaProducer(settings.kafka, flush_timeout_s=settings.dlq.publish_timeout_s)
    with dlq_store(settings) as store:
        try:
            yield store, DlqReplayer(store, producer, settings), Audit(store)
        finally:
            producer.close()


@contextmanager
def dlq_replayer(settings: Settings) -> Iterator[tuple[DlqReplayer, Audit]]:
    """A replayer of ``settings``' DLQ (its producer closed after the block) and the audit."""
    with _replaying(settings) as (_, replayer, audit):
        yield replayer, audit


@contextmanager
def redrive_tasks(settings: Settings) -> Iterator[RedriveTasks]:
    """The redrive tasks of ``settings``' DLQ, run in this process."""
    from graph_ingest.dlq.tasks import RedriveTasks

    with _replaying(settings) as (store, replayer, audit):
        yield RedriveTasks(store, replayer, audit, dlq_topic=settings.topics.dlq)


@contextmanager
def audit_log(settings: Settings) -> Iterator[Audit]:
    from graph_ingest.dlq.audit import Audit

    with dlq_store(settings) as store:
        yield Audit(store)
