"""A worker's garbage-collector thresholds come from GRAPH_INGEST_GC__* (issue 20): the young
generation's is set, the older generations' are kept; a worker about to wait collects its young
objects once enough are pending (``collect_young_garbage``)."""

import gc
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from graph_ingest.cli.gc_policy import tune_collector
from graph_ingest.consumers.runtime import collect_young_garbage
from graph_ingest.settings import Settings
from graph_ingest.settings.gc import GcSettings
from tests.young_collections import YoungCollection


@pytest.fixture(autouse=True)
def restored_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_the_young_threshold_is_set_and_the_older_ones_kept() -> None:
    gc.set_threshold(700, 7, 9)

    in_force = tune_collector(GcSettings(young_threshold=12_345))

    assert in_force == (12_345, 7, 9)
    assert gc.get_threshold() == (12_345, 7, 9)


def test_the_threshold_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPH_INGEST_GC__YOUNG_THRESHOLD", "2500")

    assert tune_collector(Settings().gc)[0] == 2500


@pytest.mark.parametrize("value", [0, -1])
def test_a_threshold_that_would_switch_the_collector_off_is_refused(value: int) -> None:
    with pytest.raises(ValidationError, match="young_threshold"):
        GcSettings(young_threshold=value)


def garbage_in_cycles(count: int) -> None:
    for _ in range(count):
        cycle: list[object] = []
        cycle.append(cycle)


def test_enough_young_objects_are_collected_now(
    young_gc_collections: list[YoungCollection],
) -> None:
    garbage_in_cycles(500)

    collect_young_garbage(at_least=100)

    assert len(young_gc_collections) == 1 and young_gc_collections[0].collected >= 500
    assert gc.get_count()[0] < 100


def test_fewer_young_objects_than_asked_for_wait(
    young_gc_collections: list[YoungCollection],
) -> None:
    garbage_in_cycles(500)

    collect_young_garbage(at_least=100_000)

    assert young_gc_collections == []
    assert gc.get_count()[0] >= 500


def test_zero_never_collects(young_gc_collections: list[YoungCollection]) -> None:
    garbage_in_cycles(500)

    collect_young_garbage(at_least=0)

    assert young_gc_collections == []


def test_a_negative_minimum_is_refused() -> None:
    with pytest.raises(ValidationError, match="idle_collect_min"):
        GcSettings(idle_collect_min=-1)
