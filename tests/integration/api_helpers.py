"""What the API tests share: the app over a pipeline's stores, in process, with a projector
folding the pipeline's operations beside it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient
from pydantic import SecretStr

from graph_ingest.api.app import create_app
from graph_ingest.domain.stages import Stage
from graph_ingest.settings import Settings
from graph_ingest.waiting import wait_until
from graph_ingest.wiring import postgres_store, run_projector
from tests.integration.pipeline import Pipeline
from tests.integration.projection_helpers import projector_settings

TOKEN = "alice-api-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def api_settings(pipeline: Pipeline, *, tokens: dict[str, str] | None = None) -> Settings:
    """The pipeline's settings (its projector group) with ``tokens`` (default: alice's)."""
    settings = projector_settings(pipeline)
    given = {"alice": TOKEN} if tokens is None else tokens
    api = settings.api.model_copy(
        update={"tokens": {name: SecretStr(token) for name, token in given.items()}}
    )
    return settings.model_copy(update={"api": api})


@contextmanager
def api_client(settings: Settings) -> Iterator[TestClient]:
    """The app, its services open for the block (its lifespan)."""
    with TestClient(create_app(settings, postgres_store)) as client:
        yield client


@contextmanager
def projecting(settings: Settings) -> Iterator[None]:
    """A projector thread folding the operations topic while the block runs."""
    stop = threading.Event()
    thread = threading.Thread(target=run_projector, args=(settings, stop), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)


def ok(client: TestClient, path: str, **params: Any) -> Any:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def projected(client: TestClient, operation_id: str, stage: Stage) -> dict[str, Any]:
    """The operation as the API shows it, once the projection has it in ``stage``."""

    def shown() -> dict[str, Any] | None:
        answer = client.get(f"/api/v1/operations/{operation_id}")
        body: dict[str, Any] = answer.json()
        return body if answer.status_code == 200 and body["stage"] == stage.value else None

    return wait_until(
        shown, timeout_s=90, interval_s=0.2, what=f"the API to show {operation_id} {stage}"
    )
