"""The dead-letter queue: its index in PostgreSQL and the operator's tools (``graph-ingest dlq``)."""
