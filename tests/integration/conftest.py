import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from graph_ingest.projections.tables import ReadTables
from graph_ingest.settings import Settings
from graph_ingest.wiring import run_projector
from tests.integration.pipeline import Pipeline, isolated_settings
from tests.integration.projection_helpers import opened_read_tables, projector_settings

PipelineFactory = Callable[..., Pipeline]


@pytest.fixture
def pipeline_factory(stack_settings: Settings) -> Iterator[PipelineFactory]:
    """Builds isolated pipelines with settings overrides (``isolated_settings`` keywords); all of
    them are torn down at the end of the test."""
    made: list[Pipeline] = []

    def make(**overrides: Any) -> Pipeline:
        pipeline = Pipeline(isolated_settings(stack_settings, **overrides))
        made.append(pipeline)
        pipeline.setup()
        return pipeline

    try:
        yield make
    finally:
        for pipeline in reversed(made):
            pipeline.teardown()


@pytest.fixture
def read_tables(pipeline: Pipeline) -> Iterator[ReadTables]:
    """The read tables of ``pipeline``'s schema, opened."""
    with opened_read_tables(pipeline.settings) as tables:
        yield tables


@pytest.fixture
def pipeline(pipeline_factory: PipelineFactory) -> Pipeline:
    """Topics, schema, consumer group and graph label of this test alone; workers not started."""
    return pipeline_factory()


@pytest.fixture
def one_partition_pipeline(pipeline_factory: PipelineFactory) -> Pipeline:
    """``pipeline`` with one plans partition: plans of any documents arrive in publish order."""
    return pipeline_factory(plan_partitions=1)


@pytest.fixture
def projected(pipeline_factory: PipelineFactory) -> Iterator[PipelineFactory]:
    """Builds pipelines as ``pipeline_factory`` does, each with a projector (a thread) folding
    its operations topic into its read tables; the projectors stop at the end of the test."""
    stop = threading.Event()
    projectors: list[threading.Thread] = []

    def make(**overrides: Any) -> Pipeline:
        pipeline = pipeline_factory(**overrides)
        projector = threading.Thread(
            target=run_projector, args=(projector_settings(pipeline), stop), daemon=True
        )
        projector.start()
        projectors.append(projector)
        return pipeline

    try:
        yield make
    finally:
        stop.set()
        for projector in projectors:
            projector.join(timeout=60)
