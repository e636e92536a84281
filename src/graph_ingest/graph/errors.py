"""The graph package's errors. The Neo4j adapter translates every driver error into one of these."""

from graph_ingest.domain.errors import DependencyUnavailable, GraphIngestError
from graph_ingest.domain.status import StatusCode


class GraphError(GraphIngestError):
    """Root of what the graph writer raises; ``code`` says how to treat it (DESIGN.md §5)."""

    dependency = "neo4j"


class GraphUnavailable(DependencyUnavailable, GraphError):
    """Neo4j could not be reached, or the connection broke (the commit outcome may be unknown).

    Re-applying is safe: graph writes are idempotent.
    """

    code = StatusCode.UNAVAILABLE


class GraphTransactionAborted(GraphError):
    """A transient failure inside Neo4j (deadlock, leader switch, ...) that outlived driver retries."""

    code = StatusCode.ABORTED


class GraphPreconditionFailed(GraphError):
    """The graph is not in a state the mutation can apply to (missing endpoint, node still linked).

    The whole transaction was rolled back; nothing of the batch was written.
    """

    code = StatusCode.FAILED_PRECONDITION


class GraphInvalidArgument(GraphError):
    """The mutation itself cannot be written (reserved property name, bad value type, bad query)."""

    code = StatusCode.INVALID_ARGUMENT


class GraphInternalError(GraphError):
    """Neo4j reported an internal error, or the driver failed in an unexpected way."""

    code = StatusCode.INTERNAL
