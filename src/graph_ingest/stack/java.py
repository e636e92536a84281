"""Locate a Java runtime good enough for Kafka 4 and Neo4j 5.26 (17 or newer)."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from graph_ingest.stack.errors import MissingToolError

MIN_JAVA = 17
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def parse_major(version_output: str) -> int | None:
    """The major version in ``java -version`` output ("1.8.0_x" is 8, "17.0.15" is 17)."""
    match = _VERSION.search(version_output)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


@functools.cache
def find_java() -> str:
    """Path of ``java`` on PATH, checked to be Java 17+; raises MissingToolError otherwise."""
    java = shutil.which("java")
    if java is None:
        raise MissingToolError(
            "java not found on PATH: install a JDK 17 (e.g. apt-get install openjdk-17-jdk-headless)"
        )
    result = subprocess.run(
        [java, "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    major = parse_major(result.stderr + result.stdout)
    if major is None or major < MIN_JAVA:
        raise MissingToolError(
            f"{java} is Java {major or 'of unknown version'}; Kafka 4 and Neo4j 5.26 need Java "
            f"{MIN_JAVA} or newer (put a JDK 17 first on PATH)"
        )
    return java
