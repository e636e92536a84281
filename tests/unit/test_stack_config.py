"""Config rendering of the local stack: pure functions, no services."""

import os
import pwd
from pathlib import Path

import pytest

from graph_ingest.stack.kafka import new_cluster_id, render_log4j2, render_server_properties
from graph_ingest.stack.neo4j import render_neo4j_conf
from graph_ingest.stack.postgres import (
    postgres_can_reach,
    reachable_home,
    server_options,
    socket_dir_for,
)


def parse_properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def test_kafka_is_one_kraft_node_on_loopback() -> None:
    props = parse_properties(
        render_server_properties(port=29192, controller_port=29193, log_dir=Path("/r/kafka/data"))
    )

    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:29193"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29192,CONTROLLER://127.0.0.1:29193"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29192"
    assert props["log.dirs"] == "/r/kafka/data"


def test_kafka_single_node_settings_that_tests_rely_on() -> None:
    props = parse_properties(
        render_server_properties(port=1, controller_port=2, log_dir=Path("/d"))
    )

    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
    ):
        assert props[key] == "1", key
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["log.cleaner.backoff.ms"] == "1000"
    assert int(props["log.cleaner.dedupe.buffer.size"]) >= 2 * 1024 * 1024
    assert props["num.network.threads"] == props["num.io.threads"] == "2"
    assert props["auto.create.topics.enable"] == "false"


def test_kafka_logs_go_to_stdout() -> None:
    config = parse_properties(render_log4j2())

    assert config["appender.out.type"] == "Console"
    assert config["rootLogger.appenderRef.out.ref"] == "STDOUT"


def test_cluster_id_is_kafka_shaped() -> None:
    ids = {new_cluster_id() for _ in range(200)}

    assert len(ids) == 200
    for cid in ids:
        assert len(cid) == 22
        assert not cid.startswith("-")
        assert set(cid) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_neo4j_is_bolt_only_on_loopback_without_auth() -> None:
    conf = parse_properties(
        render_neo4j_conf(
            bolt_port=27787,
            data_dir=Path("/r/neo4j/data"),
            logs_dir=Path("/r/logs/neo4j-server"),
            plugins_dir=Path("/r/neo4j/plugins"),
        )
    )

    assert conf["server.bolt.listen_address"] == "127.0.0.1:27787"
    assert conf["server.default_listen_address"] == "127.0.0.1"
    assert conf["server.http.enabled"] == "false"
    assert conf["server.https.enabled"] == "false"
    assert conf["dbms.security.auth_enabled"] == "false"
    assert conf["server.memory.pagecache.size"] == "128m"
    assert conf["dbms.usage_report.enabled"] == "false"
    assert conf["server.config.strict_validation.enabled"] == "false"
    assert conf["server.directories.data"] == "/r/neo4j/data"


def test_postgres_options_bind_loopback_and_keep_fsync() -> None:
    options = server_options(port=25532, socket_dir=Path("/r/my dir/postgres"))

    assert "-p 25532" in options
    assert "-k '/r/my dir/postgres'" in options
    assert "-c listen_addresses=127.0.0.1" in options
    assert "fsync" not in options


def test_postgres_socket_moves_out_of_a_too_long_run_dir() -> None:
    short = Path("/work/main/.graph-ingest/postgres")
    long = Path("/tmp/" + "x" * 120 + "/postgres")

    assert socket_dir_for(short, 25432) == short
    moved = socket_dir_for(long, 25432)
    assert moved != long
    assert len(str(moved / ".s.PGSQL.25432")) < 100
    assert socket_dir_for(long, 25432) == moved  # stable, so clients can find it again


def _has_postgres_user() -> bool:
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return False
    return True


@pytest.mark.skipif(
    os.geteuid() != 0 or not _has_postgres_user(), reason="needs root and a postgres user"
)
def test_a_run_dir_behind_a_private_folder_moves_the_cluster_where_postgres_can_reach(
    tmp_path: Path,
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    home = private / "clone" / ".graph-ingest" / "postgres"
    assert not postgres_can_reach(home)
    moved = reachable_home(home)
    assert moved != home
    assert postgres_can_reach(moved)
    assert reachable_home(home) == moved  # stable: the next `stack up` finds the same cluster
    private.chmod(0o755)
    tmp_path.chmod(0o755)
    if postgres_can_reach(home):  # every other ancestor is reachable too
        assert reachable_home(home) == home
