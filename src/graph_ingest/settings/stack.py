"""The local stack's settings (``GRAPH_INGEST_STACK__*``): where its files live, which versions
it runs, which ports it takes. Client addresses follow these ports unless set (see ``Settings``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from graph_ingest.settings.section import Section


class StackSettings(Section):
    """The local, Docker-free stack: where it lives and which ports it takes.

    Default ports sit below 32768, outside Linux's ephemeral range, so an outgoing connection
    of some other program cannot be holding one of them when the stack starts.
    """

    run_dir: Path = Path(".graph-ingest")
    cache_dir: Path = Path.home() / ".cache" / "graph-ingest"
    kafka_version: str = "4.1.1"
    neo4j_version: str = "5.26.19"
    kafka_port: int = 29092
    kafka_controller_port: int = 29093
    neo4j_bolt_port: int = 27687
    postgres_port: int = 25432
    startup_timeout_s: float = 120.0
    stop_timeout_s: float = Field(
        default=60.0, gt=0, description="SIGTERM grace period before SIGKILL when stopping"
    )
    maven_repo: Path | None = Field(
        default=None, description="Maven local repository for jar fetches (default: ~/.m2)"
    )
