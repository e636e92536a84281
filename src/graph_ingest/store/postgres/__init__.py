"""The PostgreSQL store: psycopg 3 and a connection pool, one module per concern.

Each concern's module (``operations``, ``documents``, ``registry``, ``parking``, ``outbox``,
``failures``, ``dlq_index``, ``submissions``, ``plan_claims``, ``recovery``) holds its SQL, its
parameter and row mapping, and the mixins that implement its ports on a ``TransactionSession``
(writes) or ``PooledReads`` (reads). ``PostgresUnitOfWork`` and ``PostgresOperationStore`` compose
them; ``translate`` turns psycopg's errors into ours, once.
"""
