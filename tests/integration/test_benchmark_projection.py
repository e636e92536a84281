"""The read side's benchmark cannot rot: ``benchmarks/projection.py`` runs once, with a handful
of plans, against the test stack.

The benchmark fails (non-zero) unless every plan COMPLETED, the graph is exact and the projector
process folded every operation as COMPLETED; it asserts no rate, nor does this.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
FIGURES = (
    "pipeline (1 applier):",
    "projector:",
    "lag (",
    "last COMPLETED (write side, PostgreSQL) -> folded:",
    "PostgreSQL, all server processes",
    "fold-only ceiling",
    "ratios:",
)


def test_the_projection_benchmark_folds_every_plan_and_prints_its_figures(
    stack_env: dict[str, str], tmp_path: Path
) -> None:
    # When the benchmark runs 20 plans through the pipeline with a projector beside it
    result = subprocess.run(
        [sys.executable, "benchmarks/projection.py", "--plans", "20", "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, **stack_env},
        capture_output=True,
        text=True,
        timeout=540,
    )
    # Then it succeeds: every plan completed, the graph was exact, the projection caught up
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    # and it printed every figure, of the 20 plans' 80 events (PREPARED to COMPLETED)
    for figure in FIGURES:
        assert figure in result.stdout, result.stdout
    assert "20 plans, 80 operation events" in result.stdout, result.stdout
