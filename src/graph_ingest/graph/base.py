"""The graph writer's contract: apply a batch of frozen mutations, idempotently, all or nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from graph_ingest.domain.mutation import EdgeKey, Mutation
from graph_ingest.domain.plan import GraphOptions


class GraphWriter(Protocol):
    """Writes mutations to a graph database.

    ``apply`` writes the whole batch in one transaction per database (edge deletes, node deletes,
    node upserts, edge upserts), so a failure leaves nothing of the batch behind in that database.
    Applying the same batch again converges to the same graph. Errors are ``GraphIngestError``
    subclasses carrying a status code.
    """

    def start(self) -> None:
        """Connect and verify connectivity. Constructing a writer never touches the network."""
        ...

    def close(self) -> None: ...

    def apply(self, batch: Sequence[tuple[GraphOptions, Mutation]]) -> None: ...

    def probe(self) -> None:
        """Raise (a GraphIngestError with its code) unless the graph takes a trivial write."""
        ...


class GraphReader(Protocol):
    """Reads back which elements a graph holds (reconcile). Read transactions only."""

    def find_elements(
        self, options: GraphOptions, node_ids: Sequence[str], edge_keys: Sequence[EdgeKey]
    ) -> tuple[set[str], set[EdgeKey]]:
        """The node ids and the edge keys of the arguments that the graph holds, under the base
        label of ``options`` in its database (one read transaction, batched statements)."""
        ...

    def edges_touching(self, options: GraphOptions, node_ids: Sequence[str]) -> set[EdgeKey]:
        """Every edge between two base-label nodes with an end among ``node_ids``."""
        ...

    def node_ids_after(self, options: GraphOptions, after: str, limit: int) -> list[str]:
        """The next ``limit`` node ids of the base label after ``after`` (id order): pages
        through every node, for the unreferenced-node check."""
        ...


class ReadWriteGraph(GraphWriter, GraphReader, Protocol):
    """A graph that can both be written and read back (what ``reconcile --repair`` needs)."""
