"""Backoff stays bounded however long an outage lasts."""

import pytest

from graph_ingest.resilience.backoff import Backoff, backoff_delay


@pytest.mark.parametrize("attempt", [1, 2, 5, 1_025, 10_000, 10**9])
def test_the_delay_lies_in_the_upper_half_of_its_capped_ceiling(attempt: int) -> None:
    ceiling = min(30.0, 0.5 * 2.0 ** min(attempt - 1, 1000))
    for _ in range(20):
        assert ceiling / 2 <= backoff_delay(attempt, 0.5, 30.0) <= ceiling


def test_a_huge_initial_delay_is_capped_too() -> None:
    assert 15.0 <= backoff_delay(10_000, 1e300, 30.0) <= 30.0


def test_backoff_counts_failures_and_grows_its_delay_until_a_success() -> None:
    # Given a backoff of 1s up to 8s
    backoff = Backoff(1.0, 8.0)
    # When the work fails four times
    delays = [backoff.failed() for _ in range(4)]
    # Then each delay lies in the upper half of 1, 2, 4, 8 seconds
    for delay, ceiling in zip(delays, [1.0, 2.0, 4.0, 8.0], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.failures == 4
    # And a success says how many failures came before it, and starts again
    assert backoff.succeeded() == 4
    assert backoff.failures == 0
    assert 0.5 <= backoff.failed() <= 1.0


def test_the_delay_without_a_failure_is_that_of_the_first_retry() -> None:
    backoff = Backoff(2.0, 30.0)
    assert 1.0 <= backoff.delay() <= 2.0
    assert backoff.failures == 0
