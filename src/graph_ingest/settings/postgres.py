"""PostgreSQL settings (``GRAPH_INGEST_POSTGRES__*``): the bookkeeping store's connection,
schema, timeouts and pool, turned into one libpq conninfo string."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from graph_ingest.domain.identifiers import Identifier
from graph_ingest.settings.section import Section


class PostgresSettings(Section):
    host: str = "127.0.0.1"
    port: int = 25432
    dbname: str = "postgres"
    user: str = "postgres"
    password: SecretStr | None = None
    schema_name: Identifier = "graph_ingest"
    connect_timeout_s: int = 5
    statement_timeout_ms: int = Field(
        default=60_000, ge=0, description="0 = none; bounds a statement stuck behind a zombie"
    )
    lock_timeout_ms: int = Field(default=10_000, ge=0, description="0 = none")
    plan_cache_mode: Literal["auto", "force_custom_plan", "force_generic_plan"] = Field(
        default="auto",
        description="PostgreSQL's plan_cache_mode for our sessions. auto: PostgreSQL may keep a"
        " prepared statement's generic plan after five runs. force_custom_plan: every run is"
        " planned again with its parameters and the tables' current sizes, which no stale plan"
        " survives, at ~0.1 ms of PostgreSQL's CPU per statement (2 ms per lone plan's batch;"
        " issue 20). The one lookup a stale plan was seen to hurt is never prepared anyway",
    )
    pool_min_size: int = 1
    pool_max_size: int = 4

    def conninfo(self) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(
            host=self.host,
            port=self.port,
            dbname=self.dbname,
            user=self.user,
            password=self.password.get_secret_value() if self.password else None,
            connect_timeout=self.connect_timeout_s,
            options=(
                # Quoted, as migrations and the relay quote it: an unquoted mixed-case name
                # would fold to lower case and name another schema.
                f'-c search_path="{self.schema_name}"'
                f" -c statement_timeout={self.statement_timeout_ms}"
                f" -c lock_timeout={self.lock_timeout_ms}"
                f" -c plan_cache_mode={self.plan_cache_mode}"
            ),
            application_name="graph-ingest",
        )
