"""Runtime classpaths fetched once with Maven into the cache directory, then re-used.

``<cache_dir>/<component>-<version>/libs`` holds the jars; ``.complete`` next to it records which
POM and version produced them, so editing ``infra/<component>/pom.xml`` triggers a new fetch.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from graph_ingest.stack.errors import FetchError, MissingToolError, StackError
from graph_ingest.stack.locks import file_lock
from graph_ingest.stack.process import tail

logger = logging.getLogger(__name__)

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
FETCH_TIMEOUT_S = 1800.0
INFRA_DIR = Path(__file__).resolve().parents[3] / "infra"


def pom_path(component: str, infra_dir: Path = INFRA_DIR) -> Path:
    pom = infra_dir / component / "pom.xml"
    if not pom.is_file():
        raise StackError(
            f"{pom} not found: the stack needs the repository's infra/ folder "
            "(run graph-ingest from a source checkout installed with pip install -e)"
        )
    return pom


def cache_fingerprint(pom: Path, version: str) -> str:
    return hashlib.sha256(pom.read_bytes() + b"\0" + version.encode()).hexdigest()


def mvn_command(
    mvn: str, pom: Path, component: str, version: str, output: Path, maven_repo: Path | None
) -> list[str]:
    argv = [mvn, "-B", "-q", "-f", str(pom), f"-D{component}.version={version}"]
    if maven_repo is not None:
        argv.append(f"-Dmaven.repo.local={maven_repo.expanduser().resolve()}")
    return [*argv, DEPENDENCY_PLUGIN, "-DincludeScope=runtime", f"-DoutputDirectory={output}"]


def ensure_jars(
    component: str,
    version: str,
    *,
    cache_dir: Path,
    log_path: Path,
    maven_repo: Path | None = None,
    infra_dir: Path = INFRA_DIR,
    report: Callable[[str], None] | None = None,
) -> Path:
    """The folder of ``component``'s runtime jars, fetching them with Maven on first use."""
    pom = pom_path(component, infra_dir)
    home = cache_dir.expanduser().resolve() / f"{component}-{version}"
    libs, marker = home / "libs", home / ".complete"
    wanted = cache_fingerprint(pom, version)

    def cached() -> bool:
        return marker.is_file() and marker.read_text().strip() == wanted and libs.is_dir()

    if cached():
        return libs
    with file_lock(home / ".lock"):  # another process may be fetching the same jars
        if cached():
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise MissingToolError(
                f"mvn not found on PATH: install Maven (e.g. apt-get install maven) to fetch "
                f"{component} {version} into {home}"
            )
        partial = home / "libs.partial"
        shutil.rmtree(partial, ignore_errors=True)
        argv = mvn_command(mvn, pom, component, version, partial, maven_repo)
        if report is not None:
            report(f"fetching {component} {version} jars with Maven into {libs} (once)")
        started = time.monotonic()
        returncode = _run_logged(argv, log_path, f"{component} {version}")
        jars = sorted(partial.glob("*.jar")) if partial.is_dir() else []
        if returncode != 0 or not jars:
            raise FetchError(
                f"mvn failed fetching {component} {version} jars (exit {returncode}); "
                f"see {log_path}",
                details=tail(log_path),
            )
        shutil.rmtree(libs, ignore_errors=True)
        partial.rename(libs)
        marker.write_text(wanted + "\n")
        logger.info(
            "fetched %d %s jars in %.1f s", len(jars), component, time.monotonic() - started
        )
        return libs


def _run_logged(argv: Sequence[str], log_path: Path, fetching: str) -> int:
    """Run Maven with its output (after the command line) in ``log_path``; its exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        log.write(f"$ {' '.join(argv)}\n".encode())
        log.flush()
        try:
            result = subprocess.run(
                argv, stdout=log, stderr=subprocess.STDOUT, timeout=FETCH_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise FetchError(
                f"mvn timed out fetching {fetching} jars; see {log_path}", details=tail(log_path)
            ) from exc
    return result.returncode
