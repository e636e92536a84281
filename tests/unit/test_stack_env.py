"""stack_env: a subprocess's Settings() must see the same stack as the parent's settings."""

from pathlib import Path

import pytest

from graph_ingest.settings import Settings, StackSettings
from graph_ingest.stack.envvars import stack_env


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

    for name, value in stack_env(original).items():
        monkeypatch.setenv(name, value)
    seen = Settings()

    assert seen.stack == original.stack
    assert seen.kafka.bootstrap_servers == "127.0.0.1:29192"
    assert seen.neo4j.uri == "bolt://127.0.0.1:27787"
    assert (seen.postgres.host, seen.postgres.port) == ("127.0.0.1", 25532)


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)

    env = stack_env(Settings(stack=StackSettings(run_dir=Path("rel"))))

    assert env["GRAPH_INGEST_STACK__RUN_DIR"] == str(tmp_path.resolve() / "rel")
    assert "GRAPH_INGEST_STACK__MAVEN_REPO" not in env  # None is left to its default
