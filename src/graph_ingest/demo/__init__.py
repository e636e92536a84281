"""The demo: a bundled graph schema and corpus, planned and applied on the local stack."""

from pathlib import Path

BUNDLED_GRAPH_SCHEMA = Path(__file__).resolve().parent / "graph_schema.yaml"
"""The graph schema of the demo corpus (and of the planner's tests), with its extraction rules."""

__all__ = ["BUNDLED_GRAPH_SCHEMA"]
