"""The operation stage machine. Only the transitions listed here are legal."""

from enum import StrEnum

from graph_ingest.domain.errors import IllegalTransition


class Stage(StrEnum):
    PREPARED = "PREPARED"
    GRAPH_APPLIED = "GRAPH_APPLIED"
    STATE_COMMITTED = "STATE_COMMITTED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CONFLICT = "CONFLICT"
    PARKED = "PARKED"
    DEAD_LETTERED = "DEAD_LETTERED"

    @property
    def is_terminal(self) -> bool:
        return not LEGAL_TRANSITIONS[self]


LEGAL_TRANSITIONS: dict[Stage, frozenset[Stage]] = {
    Stage.PREPARED: frozenset(
        {Stage.GRAPH_APPLIED, Stage.FAILED, Stage.CONFLICT, Stage.PARKED, Stage.DEAD_LETTERED}
    ),
    # The graph write is confirmed; only the state commit is left, or the revision moved on.
    Stage.GRAPH_APPLIED: frozenset({Stage.STATE_COMMITTED, Stage.CONFLICT, Stage.DEAD_LETTERED}),
    Stage.STATE_COMMITTED: frozenset({Stage.COMPLETED}),
    Stage.FAILED: frozenset({Stage.PREPARED, Stage.DEAD_LETTERED}),
    Stage.PARKED: frozenset({Stage.PREPARED, Stage.CONFLICT, Stage.DEAD_LETTERED}),
    Stage.DEAD_LETTERED: frozenset({Stage.PREPARED}),
    Stage.COMPLETED: frozenset(),
    Stage.CONFLICT: frozenset(),
}


def check_transition(current: Stage, target: Stage) -> None:
    """Raise IllegalTransition naming both stages unless current -> target is legal."""
    if target not in LEGAL_TRANSITIONS[current]:
        raise IllegalTransition(current.value, target.value)
