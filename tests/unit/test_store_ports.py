"""The store's ports: small, one concern each, composed into UnitOfWork and OperationStore, and
implemented concern by concern by the PostgreSQL mixins."""

from __future__ import annotations

from typing import Protocol

import pytest

from graph_ingest.store.audit import AuditLog
from graph_ingest.store.base import OperationStore, UnitOfWork
from graph_ingest.store.dlq_index import DlqIndexReader, DlqIndexWriter
from graph_ingest.store.documents import DocumentReader, DocumentWriter
from graph_ingest.store.failures import FailureLog
from graph_ingest.store.operations import OperationReader, OperationWriter
from graph_ingest.store.outbox import OutboxFeed, OutboxRetention, OutboxSignal, OutboxWriter
from graph_ingest.store.parking import ParkedOperations
from graph_ingest.store.plan_claims import PlanClaimReader, PlanClaimWriter
from graph_ingest.store.postgres.audit import PostgresAuditLog
from graph_ingest.store.postgres.dlq_index import PostgresDlqIndexReader, PostgresDlqIndexWriter
from graph_ingest.store.postgres.documents import PostgresDocumentReader, PostgresDocumentWriter
from graph_ingest.store.postgres.failures import PostgresFailureLog
from graph_ingest.store.postgres.operations import PostgresOperationReader, PostgresOperationWriter
from graph_ingest.store.postgres.outbox import PostgresOutboxFeed, PostgresOutboxWriter
from graph_ingest.store.postgres.parking import PostgresParkedOperations
from graph_ingest.store.postgres.plan_claims import PostgresPlanClaimReader, PostgresPlanClaimWriter
from graph_ingest.store.postgres.recovery import PostgresRecoveryLeases
from graph_ingest.store.postgres.redrive_tasks import PostgresRedriveTasks, PostgresRepeatFailures
from graph_ingest.store.postgres.registry import PostgresRegistryReader, PostgresRegistryWriter
from graph_ingest.store.postgres.session import OwnedPool
from graph_ingest.store.postgres.store import PostgresOperationStore
from graph_ingest.store.postgres.submissions import (
    PostgresPlannerRecordReader,
    PostgresPlannerRecordWriter,
)
from graph_ingest.store.postgres.unit_of_work import PostgresUnitOfWork
from graph_ingest.store.recovery import RecoveryStore
from graph_ingest.store.redrive_tasks import RedriveTaskStore, RepeatFailures
from graph_ingest.store.registry import RegistryReader, RegistryWriter
from graph_ingest.store.submissions import PlannerRecordReader, PlannerRecordWriter

WRITERS: dict[type, type] = {
    OperationWriter: PostgresOperationWriter,
    DocumentWriter: PostgresDocumentWriter,
    RegistryWriter: PostgresRegistryWriter,
    ParkedOperations: PostgresParkedOperations,
    OutboxWriter: PostgresOutboxWriter,
    FailureLog: PostgresFailureLog,
    DlqIndexWriter: PostgresDlqIndexWriter,
    PlannerRecordWriter: PostgresPlannerRecordWriter,
    PlanClaimWriter: PostgresPlanClaimWriter,
}
"""Each write port of ``UnitOfWork`` and the PostgreSQL mixin that implements it."""

READERS: dict[type, type] = {
    OperationReader: PostgresOperationReader,
    DocumentReader: PostgresDocumentReader,
    RegistryReader: PostgresRegistryReader,
    DlqIndexReader: PostgresDlqIndexReader,
    PlannerRecordReader: PostgresPlannerRecordReader,
    PlanClaimReader: PostgresPlanClaimReader,
}
"""Each read port of ``OperationStore`` and the PostgreSQL mixin that implements it."""

OPERATOR_PORTS: dict[type, type] = {
    RedriveTaskStore: PostgresRedriveTasks,
    RepeatFailures: PostgresRepeatFailures,
    AuditLog: PostgresAuditLog,
}
"""The operator actions' ports (redrive tasks, the audit), also implemented by the store."""

LIFECYCLE = {"start", "close", "unit_of_work", "probe", "database_time"}
MAX_PORT_METHODS = 7


def own_methods(cls: type) -> set[str]:
    """The public methods (and properties) ``cls`` defines in its own body."""
    return {
        name
        for name, value in vars(cls).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def port_methods(port: type) -> set[str]:
    """Every method of a protocol, its parent protocols' included."""
    found: set[str] = set()
    for cls in port.__mro__:
        if cls not in (object, Protocol) and getattr(cls, "_is_protocol", False):
            found |= own_methods(cls)
    return found


@pytest.mark.parametrize(
    "port",
    [*WRITERS, *READERS, *OPERATOR_PORTS, RecoveryStore, OutboxFeed, OutboxSignal, OutboxRetention],
    ids=lambda port: port.__name__,
)
def test_every_port_is_a_small_protocol(port: type) -> None:
    assert getattr(port, "_is_protocol", False)
    assert 1 <= len(port_methods(port)) <= MAX_PORT_METHODS


def test_unit_of_work_is_its_write_ports_and_nothing_else() -> None:
    assert own_methods(UnitOfWork) == set()
    assert set(UnitOfWork.__bases__) - {Protocol} == set(WRITERS)
    methods = [port_methods(port) for port in WRITERS]
    assert sum(len(m) for m in methods) == len(set().union(*methods)), "a method in two ports"


def test_operation_store_is_its_read_ports_and_the_lifecycle() -> None:
    assert own_methods(OperationStore) == LIFECYCLE
    assert set(OperationStore.__bases__) - {Protocol} == set(READERS)
    methods = [port_methods(port) for port in READERS]
    assert sum(len(m) for m in methods) == len(set().union(*methods)), "a method in two ports"
    assert not LIFECYCLE & set().union(*methods)


@pytest.mark.parametrize(
    ("port", "mixin"),
    [
        *WRITERS.items(),
        *READERS.items(),
        *OPERATOR_PORTS.items(),
    ],
    ids=lambda cls: cls.__name__,
)
def test_each_postgres_mixin_implements_exactly_its_port(port: type, mixin: type) -> None:
    assert own_methods(mixin) == port_methods(port)


def test_the_outbox_feed_is_the_feed_and_its_signal_on_one_session() -> None:
    assert own_methods(PostgresOutboxFeed) == (
        port_methods(OutboxFeed) | port_methods(OutboxSignal) | port_methods(OutboxRetention)
    )


def test_recovery_leases_and_the_store_implement_the_recovery_port() -> None:
    assert own_methods(PostgresRecoveryLeases) | {"put_plan_claims"} == port_methods(RecoveryStore)
    assert port_methods(RecoveryStore) <= own_methods(PostgresOperationStore) | own_methods(
        PostgresRecoveryLeases
    )


def test_the_postgres_unit_of_work_and_store_are_the_mixins_composed() -> None:
    assert set(PostgresUnitOfWork.__bases__) == set(WRITERS.values())
    assert set(PostgresOperationStore.__bases__) == {
        *READERS.values(),
        *OPERATOR_PORTS.values(),
        PostgresRecoveryLeases,
        OwnedPool,
    }
    assert own_methods(PostgresUnitOfWork) == set()
    assert own_methods(PostgresOperationStore) | own_methods(OwnedPool) == LIFECYCLE | {
        "put_plan_claims"
    }
