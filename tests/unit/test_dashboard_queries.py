"""What the dashboard's panels show, evaluated by promtool on series shaped like the processes'.

Several processes export the same store-wide or group-wide series (the DLQ index gauges from the
applier and the API, a group's lag from every member): the panels must take their max, not add
them up. Encoded states (breakers, projection) must read as their value mappings say. Each case
is `promtool test rules` with its own input series; a wrong expression fails with promtool's diff.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dashboard_files import DASHBOARD, load, panel_expression
from tests.prometheus_files import promtool_or_skip

pytestmark = pytest.mark.timeout(60)

APPLIER_A = 'job="applier", instance="applier-1:9464"'
APPLIER_B = 'job="applier", instance="applier-2:9464"'
API = 'job="api", instance="api:8000"'
PLANNER = 'job="planner", instance="planner:9464"'
PROJECTOR = 'job="projector", instance="projector:9464"'
EVAL = "10m"  # samples every minute from 0 to 20m: a 5m rate window is covered exactly


def series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


def expect(title: str, samples: dict[str, float], ref: str = "A") -> dict[str, Any]:
    return {
        "expr": panel_expression(load(DASHBOARD), title, ref),
        "eval_time": EVAL,
        "exp_samples": [{"labels": labels, "value": value} for labels, value in samples.items()],
    }


CASES: dict[str, tuple[list[dict[str, str]], list[dict[str, Any]]]] = {
    "failure ratio and outcome share": (
        [
            series(
                "graph_ingest_messages_consumed_total",
                f'{APPLIER_A}, topic="plans", outcome="completed"',
                "0+120x20",
            ),
            series(
                "graph_ingest_messages_consumed_total",
                f'{APPLIER_B}, topic="plans", outcome="completed"',
                "0+60x20",
            ),
            series(
                "graph_ingest_messages_consumed_total",
                f'{APPLIER_B}, topic="plans", outcome="dead_lettered"',
                "0+60x20",
            ),
            # (the planner's dead letters are requests, not plans: not in the failure ratio)
            series(
                "graph_ingest_messages_consumed_total",
                f'{PLANNER}, topic="requests", outcome="dead_lettered"',
                "0+60x20",
            ),
        ],
        [
            expect("Failure ratio", {"{}": 0.25}),
            expect(
                "Outcome share",
                {
                    '{topic="plans", outcome="completed"}': 0.75,
                    '{topic="plans", outcome="dead_lettered"}': 0.25,
                    '{topic="requests", outcome="dead_lettered"}': 1.0,
                },
            ),
        ],
    ),
    "the DLQ index, served by the applier and the API, counted once": (
        [
            series("graph_ingest_dlq_entries", f'{source}, status="{status}", code="{code}"', value)
            for source in (APPLIER_A, API)
            for status, code, value in (
                ("pending", "SCHEMA_INVALID", "5x20"),
                ("pending", "GRAPH_CONSTRAINT", "3x20"),
                ("replayed", "SCHEMA_INVALID", "7x20"),
            )
        ]
        + [
            series("graph_ingest_dlq_oldest_pending_timestamp_seconds", source, "120x20")
            for source in (APPLIER_A, API)
        ],
        [
            expect("DLQ pending", {"{}": 8}),
            expect(
                "DLQ pending by code",
                {'{code="SCHEMA_INVALID"}': 5, '{code="GRAPH_CONSTRAINT"}': 3},
            ),
            expect("DLQ entries by status", {'{status="pending"}': 8, '{status="replayed"}': 7}),
            expect("Oldest pending DLQ entry", {"{}": 600 - 120}),
            expect("Oldest pending DLQ entry age", {"{}": 600 - 120}),
        ],
    ),
    "no DLQ entry pending: an age of 0, not the age of the epoch": (
        [
            series("graph_ingest_dlq_oldest_pending_timestamp_seconds", source, "0x20")
            for source in (APPLIER_A, API)
        ],
        [expect("Oldest pending DLQ entry", {"{}": 0}), expect("Oldest pending DLQ entry age", {})],
    ),
    "a group's lag reported by two members, the larger figure shown": (
        [
            series(
                "graph_ingest_consumer_lag_seconds",
                f'{APPLIER_A}, group="appliers", topic="plans", partition="0"',
                "10x20",
            ),
            series(
                "graph_ingest_consumer_lag_seconds",
                f'{APPLIER_B}, group="appliers", topic="plans", partition="0"',
                "12x20",
            ),
            series(
                "graph_ingest_consumer_lag_offsets",
                f'{APPLIER_A}, group="appliers", topic="plans", partition="1"',
                "40x20",
            ),
            series(
                "graph_ingest_consumer_lag_offsets",
                f'{APPLIER_B}, group="appliers", topic="plans", partition="1"',
                "40x20",
            ),
        ],
        [
            expect(
                "Consumer lag (seconds) per partition",
                {'{group="appliers", topic="plans", partition="0"}': 12},
            ),
            expect(
                "Consumer lag (offsets) per partition",
                {'{group="appliers", topic="plans", partition="1"}': 40},
            ),
            expect("Max consumer lag", {"{}": 12}),
        ],
    ),
    "breakers per worker: closed 0, half-open 1, open 2; forced open 2": (
        [
            series(
                "graph_ingest_breaker_state",
                f'{worker}, dependency="neo4j", state="{state}"',
                "1x20" if state == current else "0x20",
            )
            for worker, current in ((APPLIER_A, "closed"), (APPLIER_B, "open"), (API, "half_open"))
            for state in ("closed", "half_open", "open")
        ]
        + [
            series(
                "graph_ingest_breaker_forced",
                f'{APPLIER_B}, dependency="neo4j", mode="{mode}"',
                "1x20" if mode == "open" else "0x20",
            )
            for mode in ("open", "closed")
        ],
        [
            expect(
                "Breaker state per worker",
                {
                    '{instance="applier-1:9464", dependency="neo4j"}': 0,
                    '{instance="applier-2:9464", dependency="neo4j"}': 2,
                    '{instance="api:8000", dependency="neo4j"}': 1,
                },
            ),
            expect(
                "Forced breakers per worker", {'{instance="applier-2:9464", dependency="neo4j"}': 2}
            ),
        ],
    ),
    "projection state: stalled reads 3": (
        [
            series(
                "graph_ingest_projection_state",
                f'{PROJECTOR}, state="{state}"',
                "1x20" if state == "stalled" else "0x20",
            )
            for state in ("idle", "catching_up", "stalled", "rebuilding")
        ],
        [expect("Projection state", {'{instance="projector:9464"}': 3})],
    ),
    "a worker whose heartbeat stopped five minutes ago shows an age of five minutes": (
        [
            series("graph_ingest_worker_heartbeat_timestamp_seconds", APPLIER_A, "0+60x20"),
            series("graph_ingest_worker_heartbeat_timestamp_seconds", APPLIER_B, "0+60x5"),
        ],
        [
            expect(
                "Heartbeat age per worker",
                {'{instance="applier-1:9464"}': 0, '{instance="applier-2:9464"}': 300},
            )
        ],
    ),
    "mean stage duration: time spent over stages done": (
        [
            series(
                "graph_ingest_stage_duration_seconds_sum",
                f'{APPLIER_A}, step="graph_write"',
                "0+30x20",
            ),
            series(
                "graph_ingest_stage_duration_seconds_count",
                f'{APPLIER_A}, step="graph_write"',
                "0+60x20",
            ),
        ],
        [expect("Mean stage duration by step", {'{step="graph_write"}': 0.5})],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_panel_shows_what_it_says(case: str, tmp_path: Path) -> None:
    # Given series as the processes export them
    input_series, expectations = CASES[case]
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": input_series, "promql_expr_test": expectations}
        ],
    }
    path = tmp_path / "dashboard-test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    # When promtool evaluates the panels' expressions on them
    tested = subprocess.run(
        [str(promtool_or_skip()), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    # Then each shows the expected samples
    assert tested.returncode == 0, tested.stdout + tested.stderr
