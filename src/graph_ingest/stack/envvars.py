"""Environment variables that make ``Settings()`` in a subprocess point at a given stack, and at
a given pipeline's topics, schema and consumer group."""

from __future__ import annotations

import json
from pathlib import Path

from graph_ingest.settings import Settings

PREFIX = "GRAPH_INGEST_"


def stack_env(settings: Settings) -> dict[str, str]:
    """Every StackSettings field plus the client addresses, as GRAPH_INGEST_* variables.

    Paths are made absolute, so the child may run in another directory. Merge into a child's environment (``{**os.environ, **stack_env(s)}``) so that a worker
    started as a subprocess talks to the same Kafka, Neo4j and PostgreSQL as ``settings``.
    """
    env = {
        f"{PREFIX}STACK__{name.upper()}": str(_absolute(value))
        for name, value in settings.stack.model_dump().items()
        if value is not None
    }
    env[f"{PREFIX}KAFKA__BOOTSTRAP_SERVERS"] = settings.kafka.bootstrap_servers
    env[f"{PREFIX}NEO4J__URI"] = settings.neo4j.uri
    env[f"{PREFIX}POSTGRES__HOST"] = settings.postgres.host
    env[f"{PREFIX}POSTGRES__PORT"] = str(settings.postgres.port)
    return env


def pipeline_env(settings: Settings) -> dict[str, str]:
    """``stack_env`` plus the names one pipeline owns: its topics and retry ladder, PostgreSQL
    schema and applier and planner consumer groups, so that a worker started as a subprocess joins it."""
    topics = settings.topics
    return {
        **stack_env(settings),
        f"{PREFIX}TOPICS__REQUESTS": topics.requests,
        f"{PREFIX}TOPICS__PLANS": topics.plans,
        f"{PREFIX}TOPICS__OPERATIONS": topics.operations,
        f"{PREFIX}TOPICS__DEGRADATION": topics.degradation,
        f"{PREFIX}TOPICS__CONTROL": topics.control,
        f"{PREFIX}TOPICS__RETRY_DELAYS_S": json.dumps(list(topics.retry_delays_s)),
        f"{PREFIX}POSTGRES__SCHEMA_NAME": settings.postgres.schema_name,
        f"{PREFIX}APPLIER__GROUP_ID": settings.applier.group_id,
        f"{PREFIX}PLANNER__GROUP_ID": settings.planner.group_id,
        f"{PREFIX}PROJECTOR__GROUP_ID": settings.projector.group_id,
    }


def _absolute(value: object) -> object:
    return value.expanduser().resolve() if isinstance(value, Path) else value
