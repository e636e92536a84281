"""The consumer group protocol setting: each protocol gives a configuration librdkafka accepts
for every kind of consumer we make (creating a consumer validates it, no broker needed), and
the membership log names the group, the protocol, the member and what changed."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.kafka.consumer import open_consumer
from graph_ingest.kafka.membership import Membership, describe_partitions
from graph_ingest.settings import Settings
from graph_ingest.settings.kafka import CLASSIC_ONLY, KafkaSettings

PROTOCOLS = ("classic", "consumer")
# What our consumers pass on top: a group member (applier, planner, projector, retry tiers)
# passes nothing; readers and followers (no group membership, assign only) ask for EOF events.
OVERRIDES: tuple[dict[str, Any], ...] = ({}, {"enable.partition.eof": True})


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("overrides", OVERRIDES)
def test_each_protocol_gives_a_configuration_librdkafka_accepts(
    protocol: str, overrides: dict[str, Any]
) -> None:
    settings = KafkaSettings(bootstrap_servers="127.0.0.1:1", group_protocol=protocol)
    config = settings.consumer_config("g", **overrides)
    assert config["group.protocol"] == protocol
    open_consumer(config, context="checking the configuration").close()


def test_the_consumer_protocol_sends_no_classic_setting() -> None:
    config = KafkaSettings(group_protocol="consumer", session_timeout_ms=30_000).consumer_config(
        "g"
    )
    assert not set(config) & set(CLASSIC_ONLY)
    assert "max.poll.interval.ms" in config  # still the client's under the consumer protocol


def test_the_classic_protocol_keeps_cooperative_sticky_and_its_session_timeout() -> None:
    config = KafkaSettings(session_timeout_ms=30_000).consumer_config("g")
    assert config["partition.assignment.strategy"] == "cooperative-sticky"
    assert config["session.timeout.ms"] == 30_000
    assert "group.remote.assignor" not in config


def test_a_remote_assignor_is_passed_under_the_consumer_protocol() -> None:
    settings = KafkaSettings(
        bootstrap_servers="127.0.0.1:1", group_protocol="consumer", group_remote_assignor="range"
    )
    config = settings.consumer_config("g")
    assert config["group.remote.assignor"] == "range"
    open_consumer(config, context="checking the configuration").close()


def test_a_remote_assignor_under_the_classic_protocol_fails_at_start() -> None:
    with pytest.raises(ValidationError, match="group_remote_assignor"):
        KafkaSettings(group_remote_assignor="uniform")


@pytest.mark.parametrize("setting", CLASSIC_ONLY)
def test_a_classic_setting_in_extra_under_the_consumer_protocol_fails_at_start(
    setting: str,
) -> None:
    with pytest.raises(ValidationError, match=setting):
        KafkaSettings(group_protocol="consumer", extra={setting: "1"})


def test_an_unknown_protocol_fails_at_start() -> None:
    with pytest.raises(ValidationError, match="group_protocol"):
        KafkaSettings(group_protocol="eager")


def test_the_protocol_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPH_INGEST_KAFKA__GROUP_PROTOCOL", "consumer")
    assert Settings().kafka.consumer_config("g")["group.protocol"] == "consumer"


def test_partitions_are_described_by_topic_in_order() -> None:
    described = describe_partitions({("plans", 2), ("plans.retry.1s", 0), ("plans", 0)})
    assert described == "plans[0,2] plans.retry.1s[0]"
    assert describe_partitions(()) == "nothing"


class _Member:
    """A consumer's member id, as ``Consumer.memberid`` gives it."""

    def __init__(self, member: str | None) -> None:
        self.member = member

    def memberid(self) -> str | None:
        return self.member


def _changed(membership: Membership, consumer: _Member, *args: Any) -> None:
    membership.changed(consumer, *args)  # type: ignore[arg-type]


def test_an_assignment_change_is_logged_with_group_protocol_member_and_what_is_owned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    membership = Membership.of({"group.id": "appliers", "group.protocol": "consumer"})
    consumer = _Member("m-1")
    with caplog.at_level(logging.INFO, logger="graph_ingest.kafka.membership"):
        _changed(membership, consumer, "assigned", {("p", 1)}, {("p", 0), ("p", 1)}, False)
        _changed(membership, consumer, "assigned", set(), {("p", 0), ("p", 1)}, False)
        _changed(membership, consumer, "lost", {("p", 0)}, {("p", 1)}, True)
        consumer.member = "m-2"
        _changed(membership, consumer, "assigned", set(), {("p", 1)}, False)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "group appliers (consumer protocol) member m-1: assigned p[1]; owns p[0,1]"),
        (logging.WARNING, "group appliers (consumer protocol) member m-1: lost p[0]; owns p[1] (paused)"),
        (logging.INFO, "group appliers (consumer protocol) member m-2 (was m-1): assigned nothing; owns p[1]"),
    ]  # fmt: skip
    assert membership.member == "m-2"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"GRAPH_INGEST_KAFKA__GROUP_PROTOCOL": "eager"}, "kafka.group_protocol"),
        (
            {
                "GRAPH_INGEST_KAFKA__GROUP_PROTOCOL": "consumer",
                "GRAPH_INGEST_KAFKA__EXTRA": '{"session.timeout.ms": 6000}',
            },
            "session.timeout.ms",
        ),
    ],
)
def test_a_worker_with_a_bad_group_protocol_setting_stops_at_start_naming_it(
    env: dict[str, str], named: str
) -> None:
    result = CliRunner().invoke(cli, ["worker", "applier"], env=env)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert named in result.stderr
