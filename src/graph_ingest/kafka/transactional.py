"""A transactional producer: each batch is one Kafka transaction under a stable transactional.id.

Who may write under a transactional.id is decided outside Kafka (the outbox relay: whoever holds
the schema's advisory lock). That holder calls :meth:`TransactionalProducer.take_over`, which
creates a fresh client and calls ``init_transactions``: the broker aborts any transaction still
open under that id and fences every older client using it. A fenced client's later writes and
commits are rejected, and what it wrote in its open transaction stays invisible to
``read_committed`` consumers, so everything an earlier holder committed comes before anything
the new holder writes.

A consumer that transforms what it reads (the planner: requests in, plans out) passes the offsets
it has processed with the consumer's group metadata: they are committed in the same transaction
as the messages (``send_offsets_to_transaction``), so both or neither take effect, and the group
coordinator fences a zombie member's commit (KIP-447).

Every blocking call of the transaction API runs on a helper thread and is waited for no longer
than its timeout and a grace: librdkafka does not always honour the timeout it is given
(``send_offsets_to_transaction`` waits for a lost group coordinator without a bound,
confluentinc/librdkafka#5456, #5511), and a worker blocked in it neither logs nor recovers. A call
that overruns is given up with the client: the error is ``fatal`` and ``outcome_unknown``, the
next :meth:`TransactionalProducer.take_over` fences the stuck client (whatever it still sends is
rejected), and the caller learns from the committed offsets whether the transaction committed.
The helper thread lives as long as the producer and runs one call at a time; one that overran is
left to its call, and the next call gets a new helper.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from graph_ingest.domain.status import StatusCode
from graph_ingest.kafka.errors import KafkaIngestError, KafkaUnavailable
from graph_ingest.kafka.producer import (
    Deliveries,
    ProducerMessage,
    as_kafka_error,
    delivery_failure,
    new_client,
    produce_in_order,
)
from graph_ingest.settings.kafka import KafkaSettings

logger = logging.getLogger(__name__)

T = TypeVar("T")

CALL_GRACE_S = 5.0
"""How long past its own timeout a transactional call is waited for before it is given up."""


class CallThread:
    """A daemon thread that runs the calls handed to it, one at a time, until stopped. Kept from
    call to call: a thread started and joined per call cost ~0.1 ms of CPU and of wall time
    (issue 20), once for every relay batch and twice for every planner batch.

    Not a ``ThreadPoolExecutor``: its threads are joined at interpreter exit, so a librdkafka
    call stuck in one (the very case this guards) would hold the worker's exit; this one is a
    daemon."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def submit(self, call: Callable[[], None]) -> None:
        self._calls.put(call)

    def stop(self) -> None:
        """End the thread once the call in hand, if any, returns."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            call()


class TransactionalProducer:
    """Owns one transactional confluent-kafka ``Producer``, created by :meth:`take_over` only."""

    def __init__(
        self,
        settings: KafkaSettings,
        transactional_id: str,
        *,
        timeout_s: float,
        **overrides: Any,
    ) -> None:
        self._settings = settings
        self._transactional_id = transactional_id
        self._timeout_s = timeout_s
        self._overrides = overrides
        self._client: Producer | None = None
        self._initialising: Producer | None = None
        self._helper: CallThread | None = None

    @property
    def transactional_id(self) -> str:
        return self._transactional_id

    @property
    def config(self) -> dict[str, Any]:
        return self._settings.producer_config(
            **{"transactional.id": self._transactional_id, **self._overrides}
        )

    @property
    def ready(self) -> bool:
        """True between a successful :meth:`take_over` and a fatal error or :meth:`close`."""
        return self._client is not None

    def take_over(self) -> None:
        """Replace the client with a fresh one and initialise transactions with it, fencing every
        older client under this transactional.id (this object's earlier one included).

        A client can initialise transactions once only, and initialising is what fences, so
        every take-over needs a new client. Call it only while entitled to write under this id.
        An initialisation that timed out is resumed with the same client on the next call (as
        librdkafka asks): a new client's request would race the first one's, still in flight,
        and the later of the two would fence the client that won.
        """
        client = self._initialising
        if client is None:
            self.close()
            client = new_client(self._settings, self.config)
        self._initialising = None
        self._client = client
        try:
            self._bounded(client.init_transactions, self._timeout_s)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.retriable():
                self._client, self._initialising = None, client
            else:
                self._drop_client()
            raise as_kafka_error(
                exc, f"initialising transactions as {self._transactional_id}"
            ) from exc
        except KafkaIngestError:
            self._drop_client()
            raise

    def produce_transaction(
        self,
        messages: Sequence[ProducerMessage],
        *,
        offsets: Sequence[TopicPartition] = (),
        group_metadata: object = None,
    ) -> None:
        """Produce every message in order in one transaction and commit it; return only once it
        is committed. ``offsets`` (the next offset to read of each partition, with the
        ``group_metadata`` of the consumer that read them) are committed in the transaction.

        On failure the transaction is aborted and the :class:`KafkaIngestError` raised says in
        ``delivered`` how many leading messages the broker had accepted (aborted with the rest).
        When it is ``fatal`` (fenced, say, or a call that overran its timeout) the client is
        gone and :meth:`take_over` must run again before the next transaction; when it is
        ``outcome_unknown`` too (a commit that did not end, or could not be aborted), the
        transaction may have committed: only the committed offsets, read after that take-over,
        tell.
        """
        if not messages and not offsets:
            return
        client = self._require()
        deadline = time.monotonic() + self._timeout_s
        deliveries = Deliveries(len(messages))
        try:
            client.begin_transaction()
            produce_in_order(client, messages, deliveries, deadline)
            if offsets:
                self._bounded(
                    client.send_offsets_to_transaction,
                    max(0.0, deadline - time.monotonic()),
                    list(offsets),
                    group_metadata,
                )
            self._commit(client, deadline)
        except (KafkaException, KafkaIngestError) as exc:
            raise self._abort(client, messages, deliveries, exc) from exc

    def _commit(self, client: Producer, deadline: float) -> None:
        """Commit the open transaction. It flushes first: every delivery report of the batch is
        served before it returns. (The crash tests halt a worker here, its messages written and
        the transaction still open: tests/crash/planner_process.py.)"""
        self._bounded(client.commit_transaction, max(0.0, deadline - time.monotonic()))

    def _bounded(self, call: Callable[..., T], timeout_s: float, *args: Any) -> T:
        """``call(*args, timeout_s)`` on the helper thread, waited for at most ``timeout_s`` and
        :data:`CALL_GRACE_S`. One that overruns is given up: its client is dropped (a take-over
        fences it), its thread left to end whenever the call does (a daemon: it never holds the
        process up), and a fatal, outcome-unknown :class:`KafkaUnavailable` raised."""
        outcome: list[T] = []
        failure: list[BaseException] = []
        returned = threading.Event()

        def run() -> None:
            try:
                outcome.append(call(*args, timeout_s))
            except BaseException as exc:  # handed to the waiting thread
                failure.append(exc)
            finally:
                returned.set()

        if self._helper is None:
            self._helper = CallThread(f"kafka-transactions-{self._transactional_id}")
        self._helper.submit(run)
        if returned.wait(timeout_s + CALL_GRACE_S):
            if failure:
                raise failure[0]
            return outcome[0]
        self._retire_helper()  # it ends when the stuck call does; the next call gets a new one
        name = getattr(call, "__name__", "call")
        logger.error(
            "kafka[%s] %s: %s still blocked %.1fs past its %.1fs timeout: giving the client "
            "up (a new one takes over and fences it)",
            self._settings.bootstrap_servers,
            self._transactional_id,
            name,
            CALL_GRACE_S,
            timeout_s,
        )
        self._drop_client()
        error = KafkaUnavailable(
            f"{name} as {self._transactional_id} did not return within "
            f"{timeout_s + CALL_GRACE_S:.1f}s",
            fatal=True,
        )
        error.outcome_unknown = True
        raise error

    def _abort(
        self,
        client: Producer,
        messages: Sequence[ProducerMessage],
        deliveries: Deliveries,
        exc: KafkaException | KafkaIngestError,
    ) -> KafkaIngestError:
        """End a failed transaction: abort it, or drop the client when it cannot be aborted.
        Returns the error to raise, the most telling one: a fatal API error says why the client
        is gone; otherwise the first failed delivery says which message failed and why."""
        error = as_kafka_error(exc, f"transaction of {len(messages)} messages")
        if deliveries.failures and not error.fatal:
            error = delivery_failure(messages, deliveries.failures)
        if not error.fatal:
            try:
                self._bounded(client.abort_transaction, self._timeout_s)
            except KafkaIngestError:  # overran: the client is given up already
                error.fatal = error.outcome_unknown = True
            except KafkaException as abort_exc:
                # E.g. a commit that timed out is still in progress: the transaction's outcome
                # is unknown, and only a new client (whose init settles it) can go on.
                logger.warning(
                    "kafka[%s] %s: could not abort the transaction (%s); dropping the client",
                    self._settings.bootstrap_servers,
                    self._transactional_id,
                    as_kafka_error(abort_exc, "aborting"),
                )
                error.fatal = error.outcome_unknown = True
        error.delivered = deliveries.delivered_prefix()
        if error.fatal:
            self._drop_client()
        return error

    def _drop_client(self) -> None:
        """Discard an unusable client and what it still holds, so that none of it goes out
        later. Not ``close()``: that would try to abort the transaction, which such a client
        cannot do; releasing the last reference destroys it (a call still blocked in it holds
        one until it returns, on a helper thread of its own that is left behind)."""
        client, self._client = self._client, None
        if client is not None:
            client.purge(in_queue=True, in_flight=True)

    def _require(self) -> Producer:
        if self._client is None:
            raise KafkaIngestError(
                f"transactional producer {self._transactional_id} used before take_over()",
                code=StatusCode.FAILED_PRECONDITION,
            )
        return self._client

    def close(self) -> None:
        """Drop the client. Between transactions it holds nothing: each one ended in a commit or
        an abort."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
        self._retire_helper()

    def _retire_helper(self) -> None:
        """Stop the helper thread (once its call in hand returns) and forget it."""
        if self._helper is not None:
            self._helper.stop()
            self._helper = None


__all__ = ["TransactionalProducer"]
