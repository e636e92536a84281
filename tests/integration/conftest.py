from collections.abc import Iterator

import pytest

from graph_ingest.settings import Settings
from tests.integration.pipeline import Pipeline, isolated_settings


@pytest.fixture
def pipeline(stack_settings: Settings) -> Iterator[Pipeline]:
    """Topics, schema, consumer group and graph label of this test alone; workers not started."""
    pipeline = Pipeline(isolated_settings(stack_settings))
    pipeline.setup()
    try:
        yield pipeline
    finally:
        pipeline.teardown()
