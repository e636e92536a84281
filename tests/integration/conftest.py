from collections.abc import Iterator

import pytest

from graph_ingest.settings import Settings
from tests.integration.pipeline import Pipeline, isolated_settings


def _isolated(settings: Settings) -> Iterator[Pipeline]:
    pipeline = Pipeline(settings)
    pipeline.setup()
    try:
        yield pipeline
    finally:
        pipeline.teardown()


@pytest.fixture
def pipeline(stack_settings: Settings) -> Iterator[Pipeline]:
    """Topics, schema, consumer group and graph label of this test alone; workers not started."""
    yield from _isolated(isolated_settings(stack_settings))


@pytest.fixture
def one_partition_pipeline(stack_settings: Settings) -> Iterator[Pipeline]:
    """``pipeline`` with one plans partition: plans of any documents arrive in publish order."""
    yield from _isolated(isolated_settings(stack_settings, plan_partitions=1))
