"""stack_env: a subprocess's Settings() must see the same stack as the parent's settings."""

from pathlib import Path

import pytest

from graph_ingest.settings import Settings
from graph_ingest.settings.stack import StackSettings
from graph_ingest.stack.envvars import pipeline_env, stack_env


def settings_seen_with(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """What ``Settings()`` reads in a process whose environment holds ``env``."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_round_trip_through_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Settings(
        stack=StackSettings(
            run_dir=tmp_path / "run",
            cache_dir=tmp_path / "cache",
            maven_repo=tmp_path / "m2",
            kafka_port=29192,
            kafka_controller_port=29193,
            neo4j_bolt_port=27787,
            postgres_port=25532,
            startup_timeout_s=33.0,
        )
    )

    seen = settings_seen_with(stack_env(original), monkeypatch)

    assert seen.stack == original.stack
    assert seen.kafka.bootstrap_servers == "127.0.0.1:29192"
    assert seen.neo4j.uri == "bolt://127.0.0.1:27787"
    assert (seen.postgres.host, seen.postgres.port) == ("127.0.0.1", 25532)


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)

    env = stack_env(Settings(stack=StackSettings(run_dir=Path("rel"))))

    assert env["GRAPH_INGEST_STACK__RUN_DIR"] == str(tmp_path.resolve() / "rel")
    assert "GRAPH_INGEST_STACK__MAVEN_REPO" not in env  # None is left to its default


def test_a_pipeline_round_trips_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    base = Settings()
    original = base.model_copy(
        update={
            "topics": base.topics.model_copy(
                update={
                    "plans": "p.plans",
                    "operations": "p.operations",
                    "degradation": "p.degradation",
                    "retry_delays_s": (0.5, 2.0),
                }
            ),
            "postgres": base.postgres.model_copy(update={"schema_name": "p_schema"}),
            "applier": base.applier.model_copy(update={"group_id": "p.group"}),
            "projector": base.projector.model_copy(update={"group_id": "p.projector"}),
        }
    )

    seen = settings_seen_with(pipeline_env(original), monkeypatch)

    assert seen.topics == original.topics
    assert seen.postgres.schema_name == "p_schema"
    assert seen.applier.group_id == "p.group"
    assert seen.projector.group_id == "p.projector"
    assert (seen.kafka, seen.postgres) == (original.kafka, original.postgres)
