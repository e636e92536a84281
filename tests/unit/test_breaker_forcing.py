"""Forced circuit breakers without services: the pure decision (forced mode by automatic state), the
loop's breakers obeying the operators' word, its wire format, readiness showing it, and the
CLI refusing a dependency no worker has."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest
from click.testing import CliRunner

from graph_ingest.cli.main import cli
from graph_ingest.consumers.breakers import Breakers
from graph_ingest.domain.breaker_control import BreakerControl, BreakerMode
from graph_ingest.domain.status import StatusCode
from graph_ingest.graph.errors import GraphUnavailable
from graph_ingest.hooks import (
    BreakerChanged,
    BreakerForced,
    Hooks,
    LoopSubscriber,
    Polled,
)
from graph_ingest.observability.health import HealthSubscriber
from graph_ingest.observability.probes import ready
from graph_ingest.producers.breaker_control import UnknownDependency, force
from graph_ingest.resilience.breaker import BreakerState
from graph_ingest.resilience.forcing import effective_state, holds_paused, opens_on_failure
from graph_ingest.schemas.codec import (
    decode_breaker_control,
    encode_breaker_control,
    write_single_object,
)
from graph_ingest.schemas.errors import DecodeError
from graph_ingest.schemas.messages import breaker_control_message
from graph_ingest.schemas.registry import BREAKER_CONTROL, BUNDLED
from graph_ingest.settings import Settings
from graph_ingest.settings.kafka import KafkaSettings

pytestmark = pytest.mark.timeout(30)

AT = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)
OPEN, HALF, CLOSED = BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.CLOSED
F_OPEN, F_CLOSED, AUTO = BreakerMode.FORCED_OPEN, BreakerMode.FORCED_CLOSED, BreakerMode.AUTOMATIC


def control(mode: BreakerMode, dependency: str = "neo4j") -> BreakerControl:
    return BreakerControl(dependency=dependency, mode=mode, by="alice", reason="upgrade", at=AT)


# --- the decision, row by row ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "automatic", "shown", "paused", "failures_open_it"),
    [
        (F_OPEN, CLOSED, OPEN, True, True),
        (F_OPEN, HALF, OPEN, True, True),
        (F_OPEN, OPEN, OPEN, True, True),
        (F_CLOSED, CLOSED, CLOSED, False, False),
        (F_CLOSED, HALF, CLOSED, False, False),
        (F_CLOSED, OPEN, CLOSED, False, False),
        (AUTO, CLOSED, CLOSED, False, True),
        (AUTO, HALF, HALF, False, True),
        (AUTO, OPEN, OPEN, False, True),
    ],
)
def test_the_forced_mode_decides_over_the_automatic_state(
    mode: BreakerMode,
    automatic: BreakerState,
    shown: BreakerState,
    paused: bool,
    failures_open_it: bool,
) -> None:
    assert effective_state(mode, automatic) is shown
    assert holds_paused(mode) is paused
    assert opens_on_failure(mode) is failures_open_it


# --- a loop's breakers obeying the word -------------------------------------------------------


class Recorder(LoopSubscriber):
    def __init__(self) -> None:
        self.forced: list[tuple[str, BreakerControl | None]] = []
        self.changed: list[tuple[str, str, str]] = []

    def breaker_forced(self, event: BreakerForced) -> None:
        self.forced.append((event.dependency, event.control))

    def breaker_changed(self, event: BreakerChanged) -> None:
        self.changed.append((event.dependency, event.previous, event.state))


class Word:
    """The follower's controls: a mapping replaced whole on a change."""

    def __init__(self) -> None:
        self.controls: Mapping[str, BreakerControl] = MappingProxyType({})

    def set(self, *controls: BreakerControl) -> None:
        self.controls = MappingProxyType({c.dependency: c for c in controls})

    def __call__(self) -> Mapping[str, BreakerControl]:
        return self.controls


def breakers(word: Word, recorder: Recorder) -> Breakers:
    return Breakers(
        ("postgres", "neo4j"),
        failure_threshold=2,
        probe_interval_s=1.0,
        hooks=Hooks("w", recorder),
        controls=word,
    )


def outage() -> GraphUnavailable:
    return GraphUnavailable("neo4j away")


def test_every_breaker_is_announced_at_the_first_read_and_only_changes_after() -> None:
    word, recorder = Word(), Recorder()
    loop = breakers(word, recorder)
    loop.sync()
    loop.sync()
    assert recorder.forced == [("postgres", None), ("neo4j", None)]
    word.set(control(F_OPEN))
    loop.sync()
    assert recorder.forced[2:] == [("neo4j", control(F_OPEN))]
    assert recorder.changed == [("neo4j", "CLOSED", "OPEN")]


def test_forced_open_holds_the_loop_and_release_frees_it() -> None:
    word, recorder = Word(), Recorder()
    loop = breakers(word, recorder)
    word.set(control(F_OPEN))
    loop.sync()
    assert loop.forced_open() == control(F_OPEN)
    assert loop.states() == {"postgres": CLOSED, "neo4j": OPEN}
    word.set(control(AUTO))
    loop.sync()
    assert loop.forced_open() is None
    assert loop.states() == {"postgres": CLOSED, "neo4j": CLOSED}
    assert recorder.changed == [("neo4j", "CLOSED", "OPEN"), ("neo4j", "OPEN", "CLOSED")]


def test_forced_closed_stays_closed_whatever_fails_and_release_starts_afresh() -> None:
    word, recorder = Word(), Recorder()
    loop = breakers(word, recorder)
    loop.sync()
    for _ in range(2):
        loop.failed(outage(), StatusCode.UNAVAILABLE)
    assert loop.states()["neo4j"] is OPEN  # automatic: the threshold opened it
    word.set(control(F_CLOSED))
    loop.sync()
    assert loop.states()["neo4j"] is CLOSED
    for _ in range(5):
        assert loop.failed(outage(), StatusCode.UNAVAILABLE) is None
    assert loop.states()["neo4j"] is CLOSED
    word.set(control(AUTO))
    loop.sync()
    assert loop.states()["neo4j"] is CLOSED  # not the stale OPEN from before the force
    loop.failed(outage(), StatusCode.UNAVAILABLE)
    assert loop.states()["neo4j"] is CLOSED  # one failure of two counted afresh


def test_an_open_breaker_waiting_for_a_probe_gives_way_to_a_forced_close() -> None:
    word, recorder = Word(), Recorder()
    loop = breakers(word, recorder)
    loop.sync()
    breaker = None
    for _ in range(2):
        breaker = loop.failed(outage(), StatusCode.UNAVAILABLE)
    assert breaker is not None

    def unreachable(_: str) -> None:
        raise AssertionError("no probe once forced closed")

    word.set(control(F_CLOSED))
    loop.sync()
    assert loop.answers(breaker, unreachable)


def test_a_word_on_a_dependency_the_loop_has_not_does_not_hold_it() -> None:
    word = Word()
    loop = Breakers(
        ("neo4j",), failure_threshold=2, probe_interval_s=1.0, hooks=Hooks("w"), controls=word
    )
    word.set(control(F_OPEN, dependency="postgres"))
    loop.sync()
    assert loop.forced_open() is None


# --- the wire -----------------------------------------------------------------------------------


def test_a_control_round_trips_and_is_keyed_by_its_dependency() -> None:
    forced = control(F_CLOSED, dependency="postgres")
    assert decode_breaker_control(encode_breaker_control(forced)) == forced
    message = breaker_control_message(forced, "ingestion.control")
    assert (message.topic, message.key) == ("ingestion.control", b"postgres")


def test_a_mode_no_reader_knows_is_a_decode_error() -> None:
    record = {"dependency": "neo4j", "mode": "SIDEWAYS", "by": "x", "reason": "", "at": 0}
    with pytest.raises(DecodeError, match="fails validation"):
        decode_breaker_control(write_single_object(BUNDLED.current(BREAKER_CONTROL), record))
    with pytest.raises(DecodeError):
        decode_breaker_control(b"not avro at all")


# --- readiness ----------------------------------------------------------------------------------


def health_after(*forced: tuple[str, BreakerControl | None], changed: str = "") -> dict[str, Any]:
    health = HealthSubscriber("w", clock=lambda: 10.0)
    for dependency, word in forced:
        health.breaker_forced(BreakerForced("w", dependency, word))
    health.polled(Polled("w"))
    if changed:
        health.breaker_changed(BreakerChanged("w", changed, "CLOSED", "OPEN"))
    answer = ready(health.snapshot(), max_age_s=30)
    return {"http": answer.status, **answer.body}


def test_readiness_shows_every_breaker_from_the_start() -> None:
    body = health_after(("neo4j", None), ("postgres", None))
    assert (body["http"], body["status"], body["reason"]) == (200, "ready", "consuming")
    assert body["breakers"] == {
        "neo4j": {"state": "CLOSED", "mode": "AUTOMATIC"},
        "postgres": {"state": "CLOSED", "mode": "AUTOMATIC"},
    }


def test_a_forced_open_breaker_is_degraded_and_says_who_why_and_when() -> None:
    body = health_after(("neo4j", control(F_OPEN)), ("postgres", None), changed="neo4j")
    assert (body["http"], body["status"], body["degradation_level"]) == (503, "degraded", "L1")
    assert body["reason"] == (
        "circuit breaker neo4j forced open by alice at 2026-12-02T07:00:00+00:00: upgrade: "
        "partitions paused"
    )
    assert body["breakers"]["neo4j"] == {
        "state": "OPEN",
        "mode": "FORCED_OPEN",
        "by": "alice",
        "reason": "upgrade",
        "at": "2026-12-02T07:00:00Z",
    }


# --- the CLI --------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["open", "close", "release"])
def test_an_unknown_dependency_is_a_usage_error_naming_the_known_ones(command: str) -> None:
    result = CliRunner().invoke(cli, ["breaker", command, "mongodb"])
    assert result.exit_code == 2
    assert "'mongodb' is not one of 'neo4j', 'postgres'" in result.output


def test_force_refuses_an_unknown_dependency_before_touching_kafka() -> None:
    nowhere = Settings().model_copy(
        update={"kafka": KafkaSettings(bootstrap_servers="127.0.0.1:9")}
    )
    with pytest.raises(UnknownDependency, match="known dependencies: neo4j, postgres"):
        force(nowhere, "mongodb", F_OPEN, by="alice", reason="")
