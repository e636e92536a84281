"""The Kafka client's repeated lines: once per distinct message per interval, with the count of
repeats when the interval ends (a fake clock)."""

import logging
from dataclasses import dataclass

import pytest

from graph_ingest.observability.log_dedupe import Deduplicate, normalised


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage()))


@dataclass
class Rig:
    logger: logging.Logger
    dedupe: Deduplicate
    clock: Clock
    collect: Collect


@pytest.fixture
def rig() -> Rig:
    clock = Clock()
    logger = logging.getLogger("tests.dedupe")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    for old_filter in list(logger.filters):
        logger.removeFilter(old_filter)
    dedupe = Deduplicate(60.0, clock=clock)
    collect = Collect()
    logger.addFilter(dedupe)
    logger.addHandler(collect)
    return Rig(logger, dedupe, clock, collect)


FAIL = "FAIL [rdkafka#consumer-%d] 127.0.0.1:%d/1: Connect failed (after %dms in state CONNECT)"


def test_repeats_within_the_interval_are_dropped_and_counted_when_it_ends(rig: Rig) -> None:
    # Given one failure logged 30 times in 30 s, its numbers varying
    for i in range(30):
        rig.logger.error(FAIL, i % 3, 29092, i)
        rig.clock.now += 1
    # Then only the first went through
    assert rig.collect.lines == [(logging.ERROR, FAIL % (0, 29092, 0))]
    # When the interval ends, with no new line
    rig.clock.now += 31
    rig.dedupe.sweep()
    # Then one line at the same level says how many repeats were dropped
    assert len(rig.collect.lines) == 2
    level, summary = rig.collect.lines[1]
    assert level == logging.ERROR
    assert summary.startswith(FAIL % (0, 29092, 0))
    assert "repeated 29 times in 61s" in summary
    # and the next one of the kind passes again
    rig.logger.error(FAIL, 1, 29092, 5)
    assert rig.collect.lines[-1] == (logging.ERROR, FAIL % (1, 29092, 5))


def test_distinct_messages_and_levels_each_pass_once(rig: Rig) -> None:
    for _ in range(3):
        rig.logger.error("broker down")
        rig.logger.warning("broker down")
        rig.logger.error("topic missing")
        rig.clock.now += 1
    assert rig.collect.lines == [
        (logging.ERROR, "broker down"),
        (logging.WARNING, "broker down"),
        (logging.ERROR, "topic missing"),
    ]


def test_a_line_seen_once_ends_its_interval_silently(rig: Rig) -> None:
    rig.logger.warning("once")
    rig.clock.now += 60
    rig.dedupe.sweep()
    rig.logger.warning("once")
    assert rig.collect.lines == [(logging.WARNING, "once"), (logging.WARNING, "once")]


def test_a_new_line_after_the_interval_reports_the_repeats_first(rig: Rig) -> None:
    rig.logger.warning("retrying 1")
    rig.logger.warning("retrying 2")
    rig.clock.now += 60
    rig.logger.warning("retrying 3")
    assert [line for _, line in rig.collect.lines] == [
        "retrying 1",
        "retrying 1 (repeated 1 times in 60s)",
        "retrying 3",
    ]


def test_the_final_sweep_reports_intervals_still_open(rig: Rig) -> None:
    for _ in range(5):
        rig.logger.warning("still down")
    rig.clock.now += 2
    rig.dedupe.sweep()
    assert len(rig.collect.lines) == 1
    rig.dedupe.sweep(final=True)
    assert rig.collect.lines[-1][1] == "still down (repeated 4 times in 2s)"


def test_interval_zero_lets_everything_through(rig: Rig) -> None:
    rig.dedupe.interval_s = 0
    for _ in range(3):
        rig.logger.warning("x")
    assert len(rig.collect.lines) == 3


def test_numbers_are_what_repeats_differ_in() -> None:
    assert normalised("rdkafka#consumer-12 after 105ms") == "rdkafka#consumer-# after #ms"
