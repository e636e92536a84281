"""Backoff stays bounded however long an outage lasts."""

import pytest

from graph_ingest.resilience.backoff import backoff_delay


@pytest.mark.parametrize("attempt", [1, 2, 5, 1_025, 10_000, 10**9])
def test_the_delay_lies_in_the_upper_half_of_its_capped_ceiling(attempt: int) -> None:
    ceiling = min(30.0, 0.5 * 2.0 ** min(attempt - 1, 1000))
    for _ in range(20):
        assert ceiling / 2 <= backoff_delay(attempt, 0.5, 30.0) <= ceiling


def test_a_huge_initial_delay_is_capped_too() -> None:
    assert 15.0 <= backoff_delay(10_000, 1e300, 30.0) <= 30.0
