"""The jar cache: Maven runs once per POM and version, failures name their log."""

import os
import stat
from pathlib import Path

import pytest

from graph_ingest.stack.errors import FetchError, MissingToolError, StackError
from graph_ingest.stack.jars import DEPENDENCY_PLUGIN, ensure_jars, mvn_command

# A stand-in for mvn that records its call and drops a jar into -DoutputDirectory.
FAKE_MVN = """#!/bin/sh
echo "$@" >> "{calls}"
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
done
[ -n "{fail}" ] && {{ echo "[ERROR] Could not resolve dependencies"; exit 1; }}
mkdir -p "$out" && echo jar > "$out/lib-1.0.jar"
"""


@pytest.fixture
def infra(tmp_path: Path) -> Path:
    pom = tmp_path / "infra" / "kafka" / "pom.xml"
    pom.parent.mkdir(parents=True)
    pom.write_text("<project/>")
    return tmp_path / "infra"


def install_fake_mvn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, fail: bool = False
) -> Path:
    bin_dir, calls = tmp_path / "bin", tmp_path / "mvn-calls.txt"
    bin_dir.mkdir(exist_ok=True)
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN.format(calls=calls, fail="yes" if fail else ""))
    mvn.chmod(mvn.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    return calls


def fetch(tmp_path: Path, infra: Path, version: str = "4.1.1") -> Path:
    return ensure_jars(
        "kafka",
        version,
        cache_dir=tmp_path / "cache",
        log_path=tmp_path / "logs" / "mvn-kafka.log",
        infra_dir=infra,
    )


def test_fetches_once_then_reuses_the_cache(
    tmp_path: Path, infra: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = install_fake_mvn(tmp_path, monkeypatch)

    libs = fetch(tmp_path, infra)
    again = fetch(tmp_path, infra)

    assert libs == again == tmp_path / "cache" / "kafka-4.1.1" / "libs"
    assert [p.name for p in libs.iterdir()] == ["lib-1.0.jar"]
    assert len(calls.read_text().splitlines()) == 1
    assert "-Dkafka.version=4.1.1" in calls.read_text()


def test_a_cached_classpath_needs_no_maven(
    tmp_path: Path, infra: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_mvn(tmp_path, monkeypatch)
    fetch(tmp_path, infra)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    assert fetch(tmp_path, infra).is_dir()


def test_a_new_version_or_an_edited_pom_fetches_again(
    tmp_path: Path, infra: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = install_fake_mvn(tmp_path, monkeypatch)
    fetch(tmp_path, infra)

    fetch(tmp_path, infra, version="4.2.0")
    (infra / "kafka" / "pom.xml").write_text("<project><!-- changed --></project>")
    fetch(tmp_path, infra)

    assert len(calls.read_text().splitlines()) == 3


def test_maven_failure_names_the_log_and_keeps_no_partial_cache(
    tmp_path: Path, infra: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_mvn(tmp_path, monkeypatch, fail=True)

    with pytest.raises(FetchError) as caught:
        fetch(tmp_path, infra)

    log = tmp_path / "logs" / "mvn-kafka.log"
    assert str(log) in str(caught.value)
    assert "Could not resolve dependencies" in caught.value.details
    assert not (tmp_path / "cache" / "kafka-4.1.1" / "libs").exists()
    assert not (tmp_path / "cache" / "kafka-4.1.1" / ".complete").exists()


def test_missing_maven_is_a_clear_error(
    tmp_path: Path, infra: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    with pytest.raises(MissingToolError, match="mvn not found on PATH"):
        fetch(tmp_path, infra)


def test_missing_pom_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StackError, match=r"pom\.xml not found"):
        fetch(tmp_path, tmp_path / "no-infra")


def test_mvn_command_passes_version_and_optional_local_repository(tmp_path: Path) -> None:
    pom, out = tmp_path / "pom.xml", tmp_path / "out"

    plain = mvn_command("mvn", pom, "neo4j", "5.26.19", out, None)
    isolated = mvn_command("mvn", pom, "neo4j", "5.26.19", out, tmp_path / "m2")

    assert plain[:5] == ["mvn", "-B", "-q", "-f", str(pom)]
    assert "-Dneo4j.version=5.26.19" in plain
    assert DEPENDENCY_PLUGIN in plain
    assert "-DincludeScope=runtime" in plain
    assert f"-DoutputDirectory={out}" in plain
    assert not any(arg.startswith("-Dmaven.repo.local") for arg in plain)
    assert f"-Dmaven.repo.local={tmp_path / 'm2'}" in isolated
