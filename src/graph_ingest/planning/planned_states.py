"""The latest state this planner *planned* for each document, ahead of what has committed.

A producer may send v1, v2, v3 of a document faster than they apply. Planning v2 on the committed
state (still v0) would expect revision 0 like v1 did, and end in CONFLICT; planning it on v1's
planned state expects revision 1 and waits (PARKED) behind v1 instead. So the planner remembers the
next state of every plan it produced, and plans the next version of that document on it while
the committed state has not caught up.

The overlay is bounded (least recently planned documents go first: their next version is planned
on the committed state and, if that is behind, ends in a CONFLICT the worker replans) and must be
forgotten for documents this planner no longer owns (``forget`` on partition revocation), and for
a document whose plan was not published after all. It also tells which edges and nodes other
documents' planned states list, so that a stale edge or a retraction does not delete what a plan
on its way to the graph still needs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TypeVar

from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.state import DocumentState

DocumentKey = tuple[str, str]
_T = TypeVar("_T")


class PlannedStates:
    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self._capacity = capacity
        self._states: OrderedDict[DocumentKey, DocumentState] = OrderedDict()
        self._edge_owners: dict[EdgeKey, set[DocumentKey]] = {}
        self._node_owners: dict[str, set[DocumentKey]] = {}
        self._lock = threading.Lock()

    def get(self, key: DocumentKey) -> DocumentState | None:
        with self._lock:
            return self._states.get(key)

    def remember(self, state: DocumentState) -> None:
        key = (state.space, state.document_id)
        with self._lock:
            self._drop(key)
            self._states[key] = state
            for edge in state.edge_keys:
                self._edge_owners.setdefault(edge, set()).add(key)
            for node in state.node_ids:
                self._node_owners.setdefault(node, set()).add(key)
            while len(self._states) > self._capacity:
                self._drop(next(iter(self._states)))

    def forget(self, keys: Iterable[DocumentKey]) -> None:
        with self._lock:
            for key in keys:
                self._drop(key)

    def edges_listed_by_others(self, key: DocumentKey, edges: Iterable[EdgeKey]) -> set[EdgeKey]:
        with self._lock:
            return {e for e in edges if self._edge_owners.get(e, set()) - {key}}

    def nodes_listed_by_others(self, key: DocumentKey, nodes: Iterable[str]) -> set[str]:
        with self._lock:
            return {n for n in nodes if self._node_owners.get(n, set()) - {key}}

    def __len__(self) -> int:
        return len(self._states)

    def _drop(self, key: DocumentKey) -> None:
        state = self._states.pop(key, None)
        if state is not None:
            _release(self._edge_owners, state.edge_keys, key)
            _release(self._node_owners, state.node_ids, key)


def _release(owners: dict[_T, set[DocumentKey]], items: Iterable[_T], key: DocumentKey) -> None:
    for item in items:
        holders = owners.get(item)
        if holders is not None:
            holders.discard(key)
            if not holders:
                del owners[item]


__all__ = ["DocumentKey", "PlannedStates"]
