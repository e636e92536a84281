"""The lag and store collectors without services (their readers stubbed; the integration tests
read real Kafka and PostgreSQL): the lag arithmetic, the cache, failures counted and never
raised, every known series exported, and output that promtool accepts."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.errors import KafkaUnavailable
from graph_ingest.kafka.group_positions import PartitionPosition
from graph_ingest.observability.lag import ConsumerLag, GroupLag, consumer_groups, lag_of
from graph_ingest.observability.scrape_cache import ScrapeCache
from graph_ingest.observability.store_gauges import KNOWN_ENTRIES, StoreGauges
from graph_ingest.settings import Settings
from graph_ingest.store.backlog import StoreBacklog
from graph_ingest.store.errors import StoreUnavailable
from graph_ingest.wiring import _loops
from tests.prometheus_files import promtool_check_metrics

pytestmark = pytest.mark.timeout(30)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the registry's exposition, parsed back: (name, labels) -> value."""
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def promtool_check(registry: CollectorRegistry) -> None:
    promtool_check_metrics(generate_latest(registry).decode("utf-8"))


# -- lag arithmetic ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("committed", "low", "high", "waiting_since", "expected"),
    [
        (10, 0, 15, 100.0, (5, 30.0)),  # behind: offsets to the end, age of the next message
        (15, 0, 15, None, (0, 0.0)),  # caught up
        (14, 0, 15, None, (0, 0.0)),  # only a transaction marker left: nothing waits
        (None, 4, 9, 120.0, (5, 10.0)),  # never committed: from the low watermark
        (2, 4, 9, 120.0, (5, 10.0)),  # retention deleted what it had not read
        (10, 0, 15, 140.0, (5, 0.0)),  # a timestamp ahead of our clock is no negative lag
    ],
)
def test_lag_of_a_partition(
    committed: int | None,
    low: int,
    high: int,
    waiting_since: float | None,
    expected: tuple[int, float],
) -> None:
    position = PartitionPosition("plans", 0, committed, low, high, waiting_since)
    lag = lag_of(position, now=130.0)
    assert (lag.offsets, lag.seconds) == expected


# -- the cache -----------------------------------------------------------------------------


def test_a_figure_is_read_again_only_when_older_than_its_max_age_and_a_failure_is_counted() -> None:
    reads: list[int] = []

    def read() -> int:
        reads.append(1)
        if len(reads) == 2:
            raise StoreUnavailable("PostgreSQL away")
        return len(reads)

    now = [0.0]
    cache = ScrapeCache(read, max_age_s=5.0, what="figure", clock=lambda: now[0])
    assert cache.get() == 1
    now[0] = 4.9
    assert (cache.get(), len(reads)) == (1, 1)
    now[0] = 5.0
    assert (cache.get(), cache.errors) == (None, 1)  # failed: absent, counted, not raised
    now[0] = 9.9
    assert (cache.get(), len(reads)) == (None, 2)  # the failure is remembered as long
    now[0] = 10.0
    assert (cache.get(), cache.errors) == (3, 1)


def test_a_scrape_during_a_read_gets_the_last_value_at_once() -> None:
    started, release = threading.Event(), threading.Event()
    values = iter([1, 2, 3])

    def read() -> int:
        value = next(values)
        if value == 2:
            started.set()
            release.wait(10)
        return value

    cache = ScrapeCache(read, max_age_s=0.0, what="figure")
    assert cache.get() == 1
    slow = threading.Thread(target=cache.get)
    slow.start()
    assert started.wait(10)
    assert cache.get() == 1  # not blocked behind the slow read
    release.set()
    slow.join(10)
    assert cache.get() == 3  # max age 0: every scrape reads once none is running


# -- the groups of each kind of process ----------------------------------------------------


def test_each_kind_of_process_reads_the_lag_of_its_own_groups_and_the_api_of_all() -> None:
    settings = Settings()
    topics = settings.topics
    tiers = [topic for topic, _ in topics.retry_tiers]
    assert consumer_groups(settings, "applier") == {
        "graph-ingest-applier": [topics.plans],
        "graph-ingest-applier.retry": tiers,
    }
    assert consumer_groups(settings, "planner") == {
        "graph-ingest-planner": [topics.requests],
        "graph-ingest-planner.conflicts": [topics.operations],
    }
    assert consumer_groups(settings, "projector") == {
        "graph-ingest-projector": [topics.operations, topics.dlq, topics.degradation]
    }
    assert consumer_groups(settings, "relay") == {}
    every = consumer_groups(settings, "api")
    assert every == {
        **consumer_groups(settings, "applier"),
        **consumer_groups(settings, "planner"),
        **consumer_groups(settings, "projector"),
    }


def test_the_applier_groups_are_those_its_loops_consume_in() -> None:
    settings = Settings()
    loops = {s.applier.group_id: topics for s, topics in _loops(settings)}
    assert consumer_groups(settings, "applier") == loops


# -- the lag collector -----------------------------------------------------------------------


class StubPositions:
    def __init__(self, group: str, positions: list[PartitionPosition] | None) -> None:
        self.group = group
        self.positions = positions
        self.closed = False

    def read(self, timeout_s: float) -> list[PartitionPosition]:
        if self.positions is None:
            raise KafkaUnavailable("Kafka away", code=StatusCode.UNAVAILABLE)
        return self.positions

    def close(self) -> None:
        self.closed = True


def test_the_lag_of_every_group_is_one_family_per_metric_and_a_failed_group_is_counted() -> None:
    applier = StubPositions(
        "applier",
        [
            PartitionPosition("plans", 0, 3, 0, 10, 990.0),
            PartitionPosition("plans", 1, 10, 0, 10, None),
        ],
    )
    retry = StubPositions("applier.retry", None)
    lag = ConsumerLag([GroupLag(p, cache_s=0, clock=lambda: 1000.0) for p in (applier, retry)])
    registry = CollectorRegistry()
    registry.register(lag)
    found = samples(registry)
    group, plans = ("group", "applier"), ("topic", "plans")
    assert found == {
        ("graph_ingest_consumer_lag_offsets", (group, ("partition", "0"), plans)): 7.0,
        ("graph_ingest_consumer_lag_offsets", (group, ("partition", "1"), plans)): 0.0,
        ("graph_ingest_consumer_lag_seconds", (group, ("partition", "0"), plans)): 10.0,
        ("graph_ingest_consumer_lag_seconds", (group, ("partition", "1"), plans)): 0.0,
        ("graph_ingest_consumer_lag_errors_total", (group,)): 0.0,
        ("graph_ingest_consumer_lag_errors_total", (("group", "applier.retry"),)): 1.0,
    }
    promtool_check(registry)
    lag.close()
    assert applier.closed and retry.closed


def test_a_second_lag_collector_on_one_registry_is_refused() -> None:
    registry = CollectorRegistry()
    registry.register(ConsumerLag([]))
    with pytest.raises(ValueError, match="Duplicated"):
        registry.register(ConsumerLag([]))


# -- the store gauges ----------------------------------------------------------------------


class StubBacklog:
    def __init__(self, backlog: StoreBacklog | None) -> None:
        self.value = backlog

    def backlog(self) -> StoreBacklog:
        if self.value is None:
            raise StoreUnavailable("PostgreSQL away")
        return self.value

    def close(self) -> None:
        pass


def test_store_gauges_export_every_known_dlq_series_and_the_backlog() -> None:
    reader = StubBacklog(
        StoreBacklog(
            dlq_entries={("PENDING_REVIEW", "INVALID_ARGUMENT"): 3, ("RESOLVED", "DATA_LOSS"): 1},
            oldest_pending_dlq_at=1_700_000_000.5,
            outbox_rows=12,
            outbox_oldest_age_s=4.25,
            parked_operations=2,
        )
    )
    registry = CollectorRegistry()
    registry.register(StoreGauges(reader, cache_s=0))
    found = samples(registry)
    entries = {
        dict(labels)["status"] + "/" + dict(labels)["code"]: value
        for (name, labels), value in found.items()
        if name == "graph_ingest_dlq_entries"
    }
    assert len(entries) == len(KNOWN_ENTRIES) == 36
    assert {k: v for k, v in entries.items() if v} == {
        "pending/INVALID_ARGUMENT": 3,
        "resolved/DATA_LOSS": 1,
    }
    assert {name: v for (name, labels), v in found.items() if not labels} == {
        "graph_ingest_dlq_oldest_pending_timestamp_seconds": 1_700_000_000.5,
        "graph_ingest_outbox_backlog_rows": 12,
        "graph_ingest_outbox_oldest_age_seconds": 4.25,
        "graph_ingest_parked_operations": 2,
        "graph_ingest_store_scrape_errors_total": 0,
    }
    promtool_check(registry)

    # When PostgreSQL goes away: the gauges are absent, the error counted, nothing raised
    reader.value = None
    assert samples(registry) == {("graph_ingest_store_scrape_errors_total", ()): 1.0}
    promtool_check(registry)


def test_no_pending_entry_and_an_empty_outbox_read_as_zero() -> None:
    registry = CollectorRegistry()
    registry.register(StoreGauges(StubBacklog(StoreBacklog()), cache_s=0))
    found = samples(registry)
    assert found["graph_ingest_dlq_oldest_pending_timestamp_seconds", ()] == 0
    assert found["graph_ingest_outbox_oldest_age_seconds", ()] == 0
