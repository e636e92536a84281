"""The HTTP API (`graph-ingest serve`): FastAPI routes over the read service and the DLQ services."""
