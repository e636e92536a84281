"""The rebuild's pure parts: the comparison of two sets of table digests, and the exit code an
outcome gives."""

from __future__ import annotations

import pytest

from graph_ingest.cli.exit_codes import ExitCode
from graph_ingest.cli.projections import outcome_exit_code
from graph_ingest.projections.rebuild import RebuildOutcome, compare
from graph_ingest.projections.rebuild_schema import TableDigest

pytestmark = pytest.mark.timeout(10)

SAME = TableDigest(3, "abc")


def test_tables_match_only_with_equal_counts_and_digests_on_both_sides() -> None:
    tables = compare(
        {"a": SAME, "b": SAME, "c": SAME, "only_live": SAME},
        {"a": SAME, "b": TableDigest(3, "abd"), "c": TableDigest(4, "abc"), "only_new": SAME},
    )
    assert [(t.table, t.same) for t in tables] == [
        ("a", True),
        ("b", False),
        ("c", False),
        ("only_live", False),
        ("only_new", False),
    ]


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (RebuildOutcome("l", "r", 5, completed=False), ExitCode.INTERRUPTED),
        (
            RebuildOutcome("l", "r", 5, completed=True, tables=compare({"a": SAME}, {"a": SAME})),
            ExitCode.OK,
        ),
        (
            RebuildOutcome("l", "r", 5, completed=True, tables=compare({"a": SAME}, {})),
            ExitCode.ERROR,
        ),
    ],
)
def test_a_difference_exits_1_and_a_stop_130(outcome: RebuildOutcome, code: ExitCode) -> None:
    assert outcome_exit_code(outcome) is code
