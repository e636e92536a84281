"""Apache Kafka 4 in KRaft mode: one process that is both broker and controller."""

from __future__ import annotations

import base64
import logging
import subprocess
import uuid
from pathlib import Path
from typing import Any

from graph_ingest.settings.kafka import KAFKA_CLIENT_LOGGER
from graph_ingest.stack.errors import StartupError
from graph_ingest.stack.jvm import JvmService
from graph_ingest.stack.process import port_open, tail

logger = logging.getLogger(__name__)

HEAP = "512m"
DEDUPE_BUFFER_BYTES = 4 * 1024 * 1024
FORMAT_TIMEOUT_S = 120.0


def new_cluster_id() -> str:
    """A Kafka cluster id: a random UUID, URL-safe base64 without padding, not starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def render_server_properties(*, port: int, controller_port: int, log_dir: Path) -> str:
    """server.properties for a single-node combined broker+controller on 127.0.0.1."""
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.backoff.ms": "1000",
        "log.cleaner.dedupe.buffer.size": str(DEDUPE_BUFFER_BYTES),
        # A typo in a topic name must fail loudly, not create a topic.
        "auto.create.topics.enable": "false",
    }
    lines = ["# Written by graph-ingest stack; edits are overwritten on the next start."]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


def render_log4j2() -> str:
    """log4j2 config: everything to stdout, which the stack appends to logs/kafka.log."""
    return "\n".join(
        [
            "status = warn",
            "appender.out.type = Console",
            "appender.out.name = STDOUT",
            "appender.out.layout.type = PatternLayout",
            "appender.out.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.out.ref = STDOUT",
            "logger.request.name = kafka.request.logger",
            "logger.request.level = WARN",
            "logger.zk.name = org.apache.zookeeper",
            "logger.zk.level = WARN",
            "",
        ]
    )


class KafkaService(JvmService):
    name = "kafka"
    port_fields = ("kafka_port", "kafka_controller_port")
    version_field = "kafka_version"

    @property
    def config_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def log4j_path(self) -> Path:
        return self.home / "log4j2.properties"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def marker(self) -> str:
        return str(self.config_path)

    def cluster_id(self) -> str:
        path = self.home / "cluster.id"
        if not path.exists():
            path.write_text(new_cluster_id() + "\n")
        return path.read_text().strip()

    def _java(self, java: str, libs: Path, heap: str) -> list[str]:
        return [
            java,
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j_path}",
            f"-Dkafka.logs.dir={self.layout.logs}",
            "-cp",
            f"{libs}/*",
        ]

    def prepare(self, java: str, libs: Path) -> None:
        self.config_path.write_text(
            render_server_properties(
                port=self.settings.kafka_port,
                controller_port=self.settings.kafka_controller_port,
                log_dir=self.data_dir,
            )
        )
        self.log4j_path.write_text(render_log4j2())
        if (self.data_dir / "meta.properties").exists():
            return
        self.report(f"kafka: formatting {self.data_dir}")
        argv = [
            *self._java(java, libs, "256m"),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster_id(),
            "-c",
            str(self.config_path),
            "--ignore-formatted",
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            result = subprocess.run(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.home,
                timeout=FORMAT_TIMEOUT_S,
                check=False,
            )
        if result.returncode != 0:
            raise StartupError(
                f"kafka storage format failed (exit {result.returncode}); see {self.log_path}",
                details=tail(self.log_path),
            )

    def command(self, java: str, libs: Path) -> list[str]:
        return [*self._java(java, libs, HEAP), "kafka.Kafka", str(self.config_path)]

    def probe(self, timeout_s: float = 5.0) -> bool:
        if not port_open(self.port):
            return False
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        config: dict[str, Any] = {
            "bootstrap.servers": f"127.0.0.1:{self.port}",
            "socket.connection.setup.timeout.ms": max(1000, int(timeout_s * 1000)),
            "log_level": 0,  # refused connections while starting are expected, not news
            "logger": logging.getLogger(KAFKA_CLIENT_LOGGER),  # never raw on stderr
        }
        admin = AdminClient(config)
        try:
            admin.list_topics(timeout=timeout_s)
        except KafkaException as exc:
            logger.debug("kafka not ready: %s", exc)
            return False
        return True
