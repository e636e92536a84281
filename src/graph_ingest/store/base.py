"""The bookkeeping store's contract: one unit of work per apply step, lists in and out.

The applier decides (domain logic); the store only reads and writes, inside one transaction per
``unit_of_work()``. Every call takes a list so a batch of plans costs one round of statements.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from graph_ingest.domain.dlq import DlqStatus
from graph_ingest.domain.error_detail import ErrorDetail
from graph_ingest.domain.errors import GraphIngestError
from graph_ingest.domain.limits import bounded_text
from graph_ingest.domain.mutation import EdgeKey
from graph_ingest.domain.operation import Operation
from graph_ingest.domain.stages import Stage
from graph_ingest.domain.state import CommittedRevision, DocumentState, EntityRegistration
from graph_ingest.domain.status import StatusCode
from graph_ingest.schemas.messages import OutboxMessage

OperationEventEncoder = Callable[[Operation], bytes]

ON_ITS_WAY = frozenset(
    {Stage.PREPARED, Stage.FAILED, Stage.GRAPH_APPLIED, Stage.STATE_COMMITTED, Stage.PARKED}
)
"""The stages of an operation that may still commit its revision without a person deciding."""


class StoreError(GraphIngestError):
    """Raised by store adapters; driver errors are translated into this tree (with a code)."""

    dependency = "postgres"


class RegistryConflict(StoreError):
    """A registration would reassign a name to another node, or change a node's type.

    It rejects the whole batch of registrations it came in (the applier then splits the batch to
    find the plan that carries it).
    """

    code = StatusCode.FAILED_PRECONDITION


@dataclass(frozen=True, slots=True)
class CommittedElements:
    """What a document's committed state says the graph holds: the input of ``reconcile``.

    ``superseded_edge_keys`` are the edges its revision says were removed."""

    space: str
    document_id: str
    revision: int
    operation_id: str
    node_ids: tuple[str, ...] = ()
    edge_keys: tuple[EdgeKey, ...] = ()
    superseded_edge_keys: tuple[EdgeKey, ...] = ()
    kept_edge_keys: tuple[EdgeKey, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.space, self.document_id)


@dataclass(frozen=True, slots=True)
class NewOperation:
    operation: Operation
    plan_bytes: bytes
    work_headers: Mapping[str, str] = field(default_factory=dict)
    """The headers that say whose work it is (``kafka.headers.WORK_HEADERS``), as first admitted:
    every re-send of the plan carries them."""
    first_delivery: tuple[str, int, int] | None = None
    """Where the plan's journey began (topic, partition, offset), as first admitted."""


@dataclass(frozen=True, slots=True)
class StoredPlan:
    """An operation with its frozen plan and its work headers, as admission stored them."""

    operation: Operation
    plan_bytes: bytes
    work_headers: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class DlqEntry:
    """One row of the DLQ index: the newest envelope of ``dlq_id`` and what is filtered on."""

    dlq_id: str
    status: DlqStatus
    operation_id: str | None
    fingerprint: str | None
    space: str | None
    document_id: str | None
    code: StatusCode
    error_class: str
    message: str
    parked_behind: str | None
    original_topic: str
    original_partition: int | None
    original_offset: int | None
    attempts: int
    dead_lettered_at: datetime
    envelope: bytes
    """The encoded envelope (``schemas/dlq_envelope``)."""


@dataclass(frozen=True, slots=True)
class DlqQuery:
    """Which DLQ entries to read, oldest (``dead_lettered_at``, then ``dlq_id``) first. A filter
    left None matches every entry."""

    status: DlqStatus | None = None
    code: StatusCode | None = None
    space: str | None = None
    document_id: str | None = None
    older_than_s: float | None = None
    """Only entries dead-lettered at least this long ago (by the database's clock)."""
    limit: int | None = None
    after: tuple[datetime, str] | None = None
    """Keyset paging: only entries after this (``dead_lettered_at``, ``dlq_id``)."""


@dataclass(frozen=True, slots=True)
class DlqCount:
    """How many entries have one (code, status), and how old the oldest of them is."""

    code: StatusCode
    status: DlqStatus
    entries: int
    oldest_age_s: float


@dataclass(frozen=True, slots=True)
class DlqStats:
    counts: tuple[DlqCount, ...]
    """One per (code, status) that has entries, ordered by code then status."""

    @property
    def total(self) -> int:
        return sum(c.entries for c in self.counts)

    def by_status(self) -> dict[DlqStatus, int]:
        """Every status, with 0 for those without entries."""
        return {s: sum(c.entries for c in self.counts if c.status is s) for s in DlqStatus}

    def by_code(self) -> dict[StatusCode, int]:
        """The codes that have entries."""
        found: dict[StatusCode, int] = {}
        for c in self.counts:
            found[c.code] = found.get(c.code, 0) + c.entries
        return found

    @property
    def oldest_pending_age_s(self) -> float | None:
        """How long the oldest entry waiting for review has waited; None when none waits."""
        ages = [c.oldest_age_s for c in self.counts if c.status is DlqStatus.PENDING_REVIEW]
        return max(ages, default=None)


@dataclass(frozen=True, slots=True)
class FailureAttempt:
    """A failure the applier routed to a retry tier or the DLQ (one per consumed message)."""

    source: tuple[str, int, int] | None
    """(topic, partition, offset) of the message that failed; None for a plan that followed
    another to the DLQ without being consumed."""
    operation_id: str | None
    attempt: int
    tier: int | None
    routed_to: str
    at: datetime
    detail: ErrorDetail


MAX_SUBMISSION_ISSUES = 20
"""A submission keeps its first this many extraction issues; the rest are only counted."""
MAX_ISSUE_MESSAGE_LENGTH = 300
"""An issue's message is cut there (marked), like an error message."""


@dataclass(frozen=True, slots=True)
class SubmissionIssue:
    """An extraction issue recorded with its submission: what the message says, never more of
    the document or of the model's output."""

    code: str
    message: str
    chunk_id: str | None = None


class Issue(Protocol):
    """What an issue says (the planner's ExtractionIssue is one)."""

    @property
    def code(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def chunk_id(self) -> str | None: ...


def submission_issues(issues: Sequence[Issue]) -> tuple[SubmissionIssue, ...]:
    """``issues`` as a submission keeps them: the first MAX_SUBMISSION_ISSUES, messages cut at
    MAX_ISSUE_MESSAGE_LENGTH."""
    return tuple(
        SubmissionIssue(i.code, bounded_text(i.message, MAX_ISSUE_MESSAGE_LENGTH), i.chunk_id)
        for i in issues[:MAX_SUBMISSION_ISSUES]
    )


@dataclass(frozen=True, slots=True)
class Submission:
    """What the planner made of one ingest request: its plan's operation, or its DLQ entry."""

    submission_id: str
    space: str
    document_id: str
    operation_id: str | None
    dlq_id: str | None
    trace_id: str | None
    source: tuple[str, int, int]
    """(topic, partition, offset) of the request."""
    planned_at: datetime
    issues: tuple[SubmissionIssue, ...] = ()
    """The extraction issues its plan was made with (``submission_issues``: bounded)."""
    issue_count: int = 0
    """How many issues planning recorded: past MAX_SUBMISSION_ISSUES, more than ``issues``."""


class ReplanOutcome(StrEnum):
    REQUESTED = "REQUESTED"
    """The newest request of the document was submitted again to be planned afresh."""
    REPLANNED = "REPLANNED"
    """It was planned on the committed state, as ``replanned_as``."""
    SUPERSEDED = "SUPERSEDED"
    """A newer request of the document came first: that one is what the document becomes."""
    DEAD_LETTERED = "DEAD_LETTERED"
    """It conflicted once more after ``PLANNER__MAX_REPLANS`` replans: a planning DLQ entry."""


@dataclass(frozen=True, slots=True)
class Replan:
    """What became of the CONFLICT of operation ``operation_id`` (a planned request's)."""

    operation_id: str
    submission_id: str
    attempt: int
    """1 for the first replan of a submission; the operation a replan made carries it on."""
    outcome: ReplanOutcome
    at: datetime
    replanned_as: str | None = None
    dlq_id: str | None = None


@dataclass(frozen=True, slots=True)
class PlanClaim:
    """A frozen plan too large for the plans topic, kept for the applier (the claim check)."""

    operation_id: str
    fingerprint: str
    plan_bytes: bytes

    @property
    def key(self) -> tuple[str, str]:
        return (self.operation_id, self.fingerprint)


@dataclass(frozen=True, slots=True)
class RecoveryClaim:
    """An operation a recoverer (or ``resume``) holds the lease of, with its frozen plan."""

    operation: Operation
    plan_bytes: bytes
    claimed_by: str
    lease_until: datetime
    claims: int
    """How often the operation has been claimed for recovery, this claim included."""
    work_headers: Mapping[str, str] = field(default_factory=dict)
    """The headers admission kept with the operation (``NewOperation.work_headers``)."""


class UnitOfWork(Protocol):
    """One PostgreSQL transaction. Leaving the ``with`` block commits; an exception rolls back."""

    def lock_documents(self, keys: Sequence[tuple[str, str]]) -> None:
        """Hold, until this transaction ends, the lock of each (space, document_id).

        Every apply step takes it for the documents of its batch before it reads or moves their
        revisions, so parking and releasing, fencing a graph write and committing a state never
        interleave for one document. Taken in a stable order: two appliers cannot deadlock on it."""

    def insert_operations(self, new: Sequence[NewOperation]) -> None:
        """Create operations with their frozen plans; an existing operation_id is left untouched
        (first writer wins) and does not emit any event."""

    def lock_operations(self, operation_ids: Sequence[str]) -> dict[str, Operation]:
        """Read (SELECT … FOR UPDATE) the operations that exist, keyed by id."""

    def save_operations(self, operations: Sequence[Operation]) -> None:
        """Persist new snapshots (stage, sequence, attempts, error, times) and write each one as an
        event to the outbox for the operations topic in this same transaction. A snapshot whose
        sequence is not exactly stored+1 raises StoreError (a zombie lost a race)."""

    def document_revisions(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], CommittedRevision]:
        """Current committed revision of each (space, document_id) that has one."""

    def in_flight_operations(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[Operation]]:
        """Per (space, document_id): the operations that may write the graph next or may have
        written it without committing (PREPARED, FAILED, GRAPH_APPLIED, STATE_COMMITTED, built on
        the document's current revision, 0 when it has none). Documents without any are left
        out."""

    def first_deliveries(self, operation_ids: Sequence[str]) -> dict[str, tuple[str, int, int]]:
        """Where each operation's plan was first delivered, for those admitted with one."""

    def lock_nodes(self, keys: Sequence[tuple[str, str]]) -> None:
        """Take the (space, node_id) locks ``register_entities`` takes, for nodes a write
        deletes too: whoever writes or deletes a node holds its lock until its graph write is
        recorded (GRAPH_APPLIED), so a delete and another document's upsert never interleave."""

    def listed_elsewhere(
        self,
        nodes: Sequence[tuple[tuple[str, str], str]],
        edges: Sequence[tuple[tuple[str, str], EdgeKey]],
    ) -> tuple[set[tuple[tuple[str, str], str]], set[tuple[tuple[str, str], EdgeKey]]]:
        """Of these (document, node) and (document, edge) candidates, those another document's
        committed state lists (an edge: among its edges or kept edges)."""

    def graph_applied_plans(self, spaces: Sequence[str]) -> list[tuple[tuple[str, str], bytes]]:
        """The frozen plans of the operations at GRAPH_APPLIED in these spaces (written to the
        graph, their state not committed yet), by document."""

    def register_entities(self, registrations: Sequence[EntityRegistration]) -> None:
        """Upsert registry rows. Same (space, type, normalized name) with the same node: aliases
        union. Another node for that name, or a known node under another type: RegistryConflict,
        and nothing of the call is written."""

    def commit_document_states(self, states: Sequence[DocumentState]) -> set[tuple[str, str]]:
        """Compare-and-set each document's current state to ``state`` where its current revision is
        ``state.revision - 1`` (absent counts as 0). Also writes a history row and replaces the
        document's fact sources. Returns the keys whose CAS failed (nothing written for them)."""

    def ensure_history(self, states: Sequence[DocumentState]) -> None:
        """Insert history rows that are missing (repair after a crash between commit steps)."""

    def parked_behind(self, keys: Sequence[tuple[str, str, int]]) -> list[StoredPlan]:
        """Operations waiting for (space, document_id, expected_revision), with their plan:
        PARKED, or DEAD_LETTERED behind an operation they followed to the DLQ (their entry still
        pending review)."""

    def enqueue(self, messages: Sequence[OutboxMessage]) -> None:
        """Append raw messages to the outbox (e.g. re-publishing a released plan)."""

    def routed_sources(
        self, positions: Sequence[tuple[str, int, int]]
    ) -> dict[tuple[str, int, int], str]:
        """Of these consumed positions, those whose failure was already routed (a redelivery
        after a crash before the offset commit), with where they went (``routed_to``)."""
        ...

    def record_failure(self, attempt: FailureAttempt) -> bool:
        """Record a routed failure; False (nothing written) when its source message was routed
        already: a redelivery after a crash before the offset commit."""

    def failure_history(self, operation_id: str) -> list[FailureAttempt]:
        """The routed failures of an operation, oldest first."""

    def parked_on_document(self, space: str, document_id: str) -> list[tuple[Operation, bytes]]:
        """The PARKED operations of a document (locked), with their plan bytes, in revision order."""

    def dead_lettered_at(
        self, keys: Sequence[tuple[str, str, int]]
    ) -> dict[tuple[str, str], Operation]:
        """Per (space, document_id, revision): a DEAD_LETTERED operation of the document that
        expects that revision and whose DLQ entry is pending review — the one every later
        version waits behind."""

    def purged_leaders_at(
        self, keys: Sequence[tuple[str, str, int]]
    ) -> dict[tuple[str, str], Operation]:
        """Per (space, document_id, revision): a DEAD_LETTERED operation of the document that
        expects that revision and whose DLQ entry was purged (RESOLVED), when no other operation
        on its way (``ON_ITS_WAY``, or dead-lettered and not RESOLVED) expects it: that revision
        never commits, and a version waiting for a later one waits forever."""

    def waiting_behind(self, leader: Operation) -> list[Operation]:
        """The later versions of ``leader``'s document (locked): PARKED, or DEAD_LETTERED with
        their entry pending review; in revision order."""

    def dlq_entries(self, dlq_ids: Sequence[str]) -> dict[str, DlqEntry]:
        """The DLQ index rows that exist, locked (FOR UPDATE), keyed by id."""

    def put_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        """Insert or replace DLQ index rows."""

    def lock_dlq_index(self) -> None:
        """Keep every other writer of the DLQ index (routing, replay, purge) waiting until this
        transaction ends (``dlq reindex`` replacing the rows)."""

    def newest_outbox_values(self, topic: str, since: datetime) -> dict[bytes, bytes]:
        """Per message key, the value of the newest outbox row for ``topic`` that was not
        published before ``since`` (the database's clock): unpublished, or published at or after
        it. A reader of ``topic`` that started after ``since`` may have missed those."""

    def replace_dlq_entries(self, entries: Sequence[DlqEntry]) -> None:
        """Make ``entries`` the whole DLQ index: every other row is deleted."""

    def record_submissions(self, submissions: Sequence[Submission]) -> None:
        """Insert or replace what the planner made of each submission."""

    def record_replans(self, replans: Sequence[Replan]) -> None:
        """Insert or replace what became of each CONFLICT; a REQUESTED replan never replaces a
        row (the same CONFLICT seen twice), a SUPERSEDED one only a REQUESTED one."""

    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        """Store claim-checked plans; an existing (operation id, fingerprint) is left as it is."""


class OperationStore(Protocol):
    def start(self) -> None: ...

    def close(self) -> None: ...

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]: ...

    def probe(self) -> None:
        """Raise (a StoreError with its code) unless the store answers a trivial transaction."""

    def get_operation(self, operation_id: str) -> Operation | None: ...

    def get_plan_bytes(self, operation_id: str) -> bytes | None: ...

    def get_work_headers(self, operation_id: str) -> dict[str, str]:
        """The work headers admission stored with the operation; empty when it has none."""
        ...

    def get_document_state(self, space: str, document_id: str) -> DocumentState | None: ...

    def document_history(self, space: str, document_id: str) -> list[DocumentState]: ...

    def iter_committed_elements(
        self, *, space: str | None = None, document_id: str | None = None, page_size: int = 500
    ) -> Iterator[list[CommittedElements]]:
        """The committed states (optionally of one space and/or one document id), in pages of at
        most ``page_size``, ordered by (space, document_id). Each page is its own short read."""
        ...

    def plan_bytes_of(self, operation_ids: Sequence[str]) -> dict[str, bytes]:
        """The frozen plan bytes of each operation that exists, keyed by id."""
        ...

    def claimed_edges(
        self, candidates: Sequence[tuple[tuple[str, str], EdgeKey]]
    ) -> set[tuple[tuple[str, str], EdgeKey]]:
        """The (document, edge) candidates whose edge another document's committed state lists
        among its edge keys."""
        ...

    def claimed_nodes(
        self, candidates: Sequence[tuple[tuple[str, str], str]]
    ) -> set[tuple[tuple[str, str], str]]:
        """The (document, node id) candidates whose node another document's committed state
        lists among its node ids."""
        ...

    def unlisted_nodes(self, node_ids: Sequence[str]) -> set[str]:
        """The node ids of ``node_ids`` that no document's committed state lists (reconcile:
        nodes the graph holds that nothing references)."""
        ...

    def registry_lookup(
        self, space: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The node each registered (entity_type, normalized_name) of ``space`` is bound to; keys
        that are not registered are left out. One read for the whole list."""
        ...

    def database_time(self) -> datetime:
        """The database's clock now: the clock of ``older_than_s`` filters and outbox marks."""
        ...

    # -- the DLQ index (each call its own short read) --------------------------------------

    def list_dlq_entries(self, query: DlqQuery) -> list[DlqEntry]:
        """The entries ``query`` selects, oldest first, at most ``query.limit``."""
        ...

    def count_dlq_entries(self, query: DlqQuery) -> int:
        """How many entries ``query`` selects, its ``limit`` aside."""
        ...

    def get_dlq_entry(self, dlq_id: str) -> DlqEntry | None: ...

    def dlq_stats(self) -> DlqStats: ...

    # -- the planner's records (each call its own short read) ------------------------------

    def get_submission(self, submission_id: str) -> Submission | None: ...

    def submission_of_operation(self, operation_id: str) -> Submission | None:
        """The submission whose request was (last) planned as ``operation_id``."""
        ...

    def newest_submission(self, space: str, document_id: str) -> Submission | None:
        """The document's submission recorded last (the highest request offset)."""
        ...

    def get_replan(self, operation_id: str) -> Replan | None:
        """What became of the CONFLICT of ``operation_id``; None if it had none (yet)."""
        ...

    def replan_making(self, operation_id: str) -> Replan | None:
        """The replan that planned ``operation_id``; None when its request was planned first
        hand."""
        ...

    def plan_claims(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        """The claim-checked plan bytes of each (operation id, fingerprint) stored."""
        ...


class RecoveryStore(Protocol):
    """Leases on stranded operations, so that two recoverers never re-publish the same one.

    A lease is taken in one short transaction and outlives it: the claim says "I am re-publishing
    this plan; leave it alone until ``lease_until``". Lease times are the database's clock, the
    one clock every recoverer shares."""

    def claim_for_recovery(
        self,
        *,
        stages: Collection[Stage],
        older_than_s: float,
        limit: int,
        claimer: str,
        lease_s: float,
    ) -> list[RecoveryClaim]:
        """Claim up to ``limit`` operations in ``stages``, unchanged for ``older_than_s``, whose
        lease is free (never taken or expired) and that no retry is scheduled for in the future;
        oldest (``updated_at``) first. A PARKED operation only once its document has reached
        (or passed) the revision it waits for: before that, its predecessor's commit releases
        it, and re-publishing it would only park it again. Rows another transaction holds locked (an applier at work,
        another recoverer claiming) are skipped, not waited for."""

    def claim_operation(
        self, operation_id: str, *, stages: Collection[Stage], claimer: str, lease_s: float
    ) -> RecoveryClaim | None:
        """Take the lease of one operation if it is in ``stages``, whoever held it (an operator's
        explicit resume); None if it does not exist or is in another stage."""

    def stranded_parked(self, *, older_than_s: float, limit: int) -> list[Operation]:
        """PARKED operations unchanged for ``older_than_s`` whose predecessor is gone: no
        operation expecting their document's committed revision is on its way (``ON_ITS_WAY``, or
        DEAD_LETTERED with an entry that is not RESOLVED), so the revision they wait for never
        commits. Oldest first, at most ``limit``."""

    def release_recovery_claim(self, operation_id: str, claimer: str) -> bool:
        """End ``claimer``'s lease early (its re-publish failed); False if it holds none."""

    def put_plan_claims(self, claims: Sequence[PlanClaim]) -> None:
        """Store claim-checked plans (``UnitOfWork.put_plan_claims``, in its own transaction)."""


__all__ = [
    "ON_ITS_WAY",
    "CommittedElements",
    "DlqCount",
    "DlqEntry",
    "DlqQuery",
    "DlqStats",
    "FailureAttempt",
    "NewOperation",
    "OperationEventEncoder",
    "OperationStore",
    "PlanClaim",
    "RecoveryClaim",
    "RecoveryStore",
    "RegistryConflict",
    "Replan",
    "ReplanOutcome",
    "StoreError",
    "StoredPlan",
    "Submission",
    "UnitOfWork",
]
