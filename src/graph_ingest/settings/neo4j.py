"""Neo4j settings (``GRAPH_INGEST_NEO4J__*``): the bolt address, credentials, pool and timeouts
the graph writer uses."""

from __future__ import annotations

from pydantic import SecretStr

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.settings.section import Section


class Neo4jSettings(Section):
    uri: str = "bolt://127.0.0.1:27687"
    user: str = "neo4j"
    password: SecretStr | None = None
    database: Identifier = "neo4j"
    max_connection_pool_size: int = 20
    connection_timeout_s: float = 5.0
    transaction_timeout_s: float = 60.0

    def auth(self) -> tuple[str, str] | None:
        return None if self.password is None else (self.user, self.password.get_secret_value())
