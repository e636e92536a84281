"""Neo4j 5.26 Community, Bolt only, on 127.0.0.1 with authentication off (local use only)."""

from __future__ import annotations

import logging
from pathlib import Path

from graph_ingest.stack.jvm import JvmService
from graph_ingest.stack.process import port_open

logger = logging.getLogger(__name__)

HEAP = "1g"
PAGECACHE = "128m"
ADD_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
)


def render_neo4j_conf(*, bolt_port: int, data_dir: Path, logs_dir: Path, plugins_dir: Path) -> str:
    settings = {
        "server.directories.data": str(data_dir),
        "server.directories.logs": str(logs_dir),
        "server.directories.plugins": str(plugins_dir),
        "server.default_listen_address": "127.0.0.1",
        "server.default_advertised_address": "127.0.0.1",
        "server.bolt.enabled": "true",
        "server.bolt.listen_address": f"127.0.0.1:{bolt_port}",
        "server.bolt.advertised_address": f"127.0.0.1:{bolt_port}",
        "server.http.enabled": "false",
        "server.https.enabled": "false",
        "dbms.security.auth_enabled": "false",
        "server.memory.heap.initial_size": HEAP,
        "server.memory.heap.max_size": HEAP,
        "server.memory.pagecache.size": PAGECACHE,
        "dbms.usage_report.enabled": "false",
        "server.config.strict_validation.enabled": "false",
        # Bolt's thread pools are shut down after the databases have stopped and checkpointed;
        # the default 5 s grace (twice) made every clean stop take 10 s instead of 0.4 s.
        "internal.server.bolt.thread_pool_shutdown_wait_time": "0s",
    }
    lines = ["# Written by graph-ingest stack; edits are overwritten on the next start."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


class Neo4jService(JvmService):
    name = "neo4j"
    port_fields = ("neo4j_bolt_port",)
    version_field = "neo4j_version"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    @property
    def marker(self) -> str:
        return f"--config-dir={self.conf_dir}"

    def prepare(self, java: str, libs: Path) -> None:
        data, plugins = self.home / "data", self.home / "plugins"
        logs = self.layout.logs / "neo4j-server"
        for folder in (self.conf_dir, data, plugins, logs):
            folder.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "neo4j.conf").write_text(
            render_neo4j_conf(
                bolt_port=self.port, data_dir=data, logs_dir=logs, plugins_dir=plugins
            )
        )

    def command(self, java: str, libs: Path) -> list[str]:
        return [
            java,
            f"-Xms{HEAP}",
            f"-Xmx{HEAP}",
            "-XX:+UseG1GC",
            # On a 1 GiB heap G1's regions are 1 MiB, so an object of 512 KiB or more is
            # humongous. Our batches make Neo4j allocate such objects, and its GC log showed them
            # starting concurrent mark cycles: on a stack that had run the benchmarks, GC took
            # 14-19 % of Neo4j's CPU, 3-6 % with 4 MiB regions (docs/performance.md, twenty-first
            # round).
            "-XX:G1HeapRegionSize=4m",
            "-Djava.awt.headless=true",
            "-Dio.netty.tryReflectionSetAccessible=true",
            *ADD_OPENS,
            "-cp",
            f"{libs}/*",
            "org.neo4j.server.CommunityEntryPoint",
            f"--home-dir={self.home}",
            f"--config-dir={self.conf_dir}",
            "--console-mode",
        ]

    def probe(self, timeout_s: float = 5.0) -> bool:
        if not port_open(self.port):
            return False
        from neo4j import GraphDatabase
        from neo4j.exceptions import DriverError, Neo4jError

        try:
            with (
                GraphDatabase.driver(
                    f"bolt://127.0.0.1:{self.port}",
                    auth=None,
                    connection_timeout=timeout_s,
                    connection_acquisition_timeout=timeout_s,
                ) as driver,
                driver.session(database="neo4j") as session,
            ):
                record = session.run("RETURN 1 AS ok").single()
        except (DriverError, Neo4jError, OSError) as exc:
            logger.debug("neo4j not ready: %s", exc)
            return False
        return record is not None and record["ok"] == 1
