"""Option types of the commands: durations, and times with their timezone."""

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.main import cli
from graph_ingest.cli.params import AwareDateTime
from graph_ingest.domain.durations import format_duration, parse_duration


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T09:30:00Z", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
        ("2026-12-01T10:30:00+01:00", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
        ("2026-12-01 09:30:00.250-05:00", datetime(2026, 12, 1, 14, 30, 0, 250000, tzinfo=UTC)),
    ],
)
def test_times_with_a_timezone_parse_and_keep_their_offset(text: str, expected: datetime) -> None:
    parsed = AwareDateTime().convert(text, None, None)
    assert parsed == expected
    assert parsed.utcoffset() == datetime.fromisoformat(text).utcoffset()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("2026-12-01T09:30:00", "has no timezone"),
        ("2026-12-01", "has no timezone"),
        ("yesterday", "is not an ISO 8601 time"),
        ("2026-13-01T09:30:00Z", "is not an ISO 8601 time"),
        ("", "is not an ISO 8601 time"),
    ],
)
def test_a_naive_or_malformed_time_is_refused_with_an_example(text: str, why: str) -> None:
    with pytest.raises(click.BadParameter, match=why) as refused:
        AwareDateTime().convert(text, None, None)
    assert "e.g. 2026-12-01T09:30:00Z" in str(refused.value)


@pytest.mark.parametrize("time", ["2026-12-01T09:30:00", "not a time"])
def test_submit_refuses_a_naive_or_malformed_source_time_as_a_usage_error(
    time: str, tmp_path: Path
) -> None:
    document = tmp_path / "notes.txt"
    document.write_text("Alice met Bob.")

    result = CliRunner().invoke(
        cli, ["submit", "--space", "kb", "--source-updated-at", time, str(document)]
    )

    assert result.exit_code == ExitCode.USAGE
    assert "Invalid value for '--source-updated-at'" in result.stderr
    assert "e.g. 2026-12-01T09:30:00Z" in result.stderr


def test_submit_help_explains_the_source_time_with_an_example() -> None:
    result = CliRunner().invoke(cli, ["submit", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "--source-updated-at TIME" in text
    assert "--source-updated-at 2026-12-01T09:30:00Z" in text  # the example


def test_an_aware_time_passes_through_unchanged() -> None:
    given = datetime(2026, 12, 1, 9, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert AwareDateTime().convert(given, None, None) is given
