"""Option types of the commands: durations."""

import pytest

from graph_ingest.cli.params import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("1d", 86400),
        ("250ms", 0.25),
        ("1h30m", 5400),
        ("1.5m", 90),
        ("90", 90),
        ("0s", 0),
        (" 5M ", 300),
    ],
)
def test_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "5x", "-5m", "1h30", "5m!", "five minutes"])
def test_what_is_not_a_duration_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 30s, 5m"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(300, "5m"), (7200, "2h"), (86400, "1d"), (30, "30s"), (1.5, "1.5s")]
)
def test_durations_print_in_their_shortest_exact_unit(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds
