"""The package's one exception root. Subpackages raise subclasses; adapters translate driver errors."""

from graph_ingest.domain.status import StatusCode


class GraphIngestError(Exception):
    """Root of every error graph-ingest raises on purpose; carries a status code."""

    code: StatusCode = StatusCode.INTERNAL
    dependency: str | None = None
    """The backing service an adapter's error is about ("postgres", "neo4j", "kafka"), if any."""

    def __init__(self, message: str, *, code: StatusCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class ConfigurationError(GraphIngestError):
    code = StatusCode.FAILED_PRECONDITION


class DependencyUnavailable(GraphIngestError):
    """A backing service (Kafka, Neo4j, PostgreSQL) could not be reached or timed out."""

    code = StatusCode.UNAVAILABLE
