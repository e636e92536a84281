"""Errors raised while planning a document. Each carries the status code that routes it."""

from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.status import StatusCode


class PlanningError(GraphIngestError):
    """A request that cannot be planned as sent: invalid document, schema violation, ambiguity."""

    code = StatusCode.INVALID_ARGUMENT


class GraphSchemaError(PlanningError):
    """A graph schema file that does not load or does not validate."""

    code = StatusCode.FAILED_PRECONDITION


class ExtractionFailed(PlanningError):
    """The extractor could not produce candidates. Transient causes carry a transient code
    (UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED) and may carry the delay the service
    asked for (``retry_after_s``, from a Retry-After header)."""

    def __init__(
        self, message: str, *, code: StatusCode | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.retry_after_s = retry_after_s
