"""The local stack against real clients: each service answers, `up` is idempotent, and single
services stop and start again (as outage tests will do) without losing data."""

from __future__ import annotations

import json
import time
import uuid

import psycopg
import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in its __all__
    AdminClient,
    ConfigResource,
    NewTopic,
)
from neo4j import GraphDatabase

from graph_ingest.cli.main import cli
from graph_ingest.settings import Settings
from graph_ingest.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def pg_connect(settings: Settings) -> psycopg.Connection[tuple[object, ...]]:
    pg = settings.postgres
    return psycopg.connect(
        host=pg.host, port=pg.port, user=pg.user, dbname=pg.dbname, connect_timeout=5
    )


def test_every_service_answers_a_real_client(stack_settings: Settings) -> None:
    metadata = AdminClient(stack_settings.kafka.common_config()).list_topics(timeout=10)
    assert [b.port for b in metadata.brokers.values()] == [stack_settings.stack.kafka_port]

    neo = stack_settings.neo4j
    with GraphDatabase.driver(neo.uri, auth=neo.auth()) as driver:
        records, _, _ = driver.execute_query("RETURN 1 AS one", database_=neo.database)
    assert records[0]["one"] == 1

    with psycopg.connect(stack_settings.postgres.conninfo()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_kafka_refuses_to_auto_create_topics(stack_settings: Settings) -> None:
    admin = AdminClient(stack_settings.kafka.common_config())

    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values()
    configs = future.result(timeout=10)

    assert configs["auto.create.topics.enable"].value == "false"
    assert configs["offsets.topic.replication.factor"].value == "1"


def test_up_again_is_a_fast_no_op(local_stack: LocalStack) -> None:
    before = local_stack.status()
    assert before.ready

    started = time.monotonic()
    after = local_stack.up()
    elapsed = time.monotonic() - started

    assert [s.pid for s in after.services] == [s.pid for s in before.services]
    assert elapsed < 5.0


def test_status_json_from_the_cli(stack_env: dict[str, str], stack_settings: Settings) -> None:
    result = CliRunner().invoke(cli, ["stack", "status", "--json"], env=stack_env)

    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ready"] is True
    ports = {s["name"]: s["port"] for s in payload["services"]}
    assert ports == {
        "kafka": stack_settings.stack.kafka_port,
        "neo4j": stack_settings.stack.neo4j_bolt_port,
        "postgres": stack_settings.stack.postgres_port,
    }


def test_postgres_stops_and_starts_with_its_data(
    local_stack: LocalStack, stack_settings: Settings
) -> None:
    schema = f"t_stack_{uuid.uuid4().hex[:8]}"
    with pg_connect(stack_settings) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.kept (v text)")
        conn.execute(f"INSERT INTO {schema}.kept VALUES ('before stop')")
    try:
        # When: a clean stop, then a crash-like stop (immediate, no checkpoint)
        for hard in (False, True):
            assert local_stack.stop_service("postgres", hard=hard) is True
            assert not local_stack.status().service("postgres").ready
            with pytest.raises(psycopg.OperationalError):
                pg_connect(stack_settings).close()

            status = local_stack.start_service("postgres")

            # Then: committed rows are there again
            assert status.ready
            with pg_connect(stack_settings) as conn:
                rows = conn.execute(f"SELECT v FROM {schema}.kept").fetchall()
            assert rows == [("before stop",)]
    finally:
        local_stack.start_service("postgres")
        with pg_connect(stack_settings) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_kafka_stops_and_starts_with_its_topics(
    local_stack: LocalStack, stack_settings: Settings
) -> None:
    kafka = stack_settings.kafka
    topic = f"t.stack.{uuid.uuid4().hex[:8]}"
    admin = AdminClient(kafka.common_config())
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(
        timeout=30
    )
    producer = Producer(kafka.producer_config())
    producer.produce(topic, key=b"k", value=b"kept")
    assert producer.flush(30) == 0
    try:
        assert local_stack.stop_service("kafka") is True
        assert not local_stack.status().service("kafka").ready

        assert local_stack.start_service("kafka").ready

        consumer = Consumer(kafka.consumer_config(f"g-{topic}"))
        consumer.subscribe([topic])
        try:
            deadline = time.monotonic() + 60
            message = None
            while message is None and time.monotonic() < deadline:
                candidate = consumer.poll(1.0)
                if candidate is not None and candidate.error() is None:
                    message = candidate
        finally:
            consumer.close()
        assert message is not None and message.value() == b"kept"
    finally:
        local_stack.start_service("kafka")
        admin.delete_topics([topic])


def test_neo4j_stops_and_starts_with_its_graph(
    local_stack: LocalStack, stack_settings: Settings
) -> None:
    neo = stack_settings.neo4j
    label = f"StackTest_{uuid.uuid4().hex[:8]}"
    with GraphDatabase.driver(neo.uri, auth=neo.auth()) as driver:
        driver.execute_query(f"CREATE (:{label} {{v: 'kept'}})", database_=neo.database)
    try:
        assert local_stack.stop_service("neo4j") is True
        assert not local_stack.status().service("neo4j").ready

        assert local_stack.start_service("neo4j").ready

        with GraphDatabase.driver(neo.uri, auth=neo.auth()) as driver:
            records, _, _ = driver.execute_query(
                f"MATCH (n:{label}) RETURN n.v AS v", database_=neo.database
            )
        assert [r["v"] for r in records] == ["kept"]
    finally:
        local_stack.start_service("neo4j")
        with GraphDatabase.driver(neo.uri, auth=neo.auth()) as driver:
            driver.execute_query(f"MATCH (n:{label}) DELETE n", database_=neo.database)
