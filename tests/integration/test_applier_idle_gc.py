"""An applier with nothing to apply collects its young garbage before it waits for plans, so that
a collection's pause falls between plans and not on one (issue 20, ``GcSettings.idle_collect_min``);
its retry tiers' loop, idle while the plans loop holds a batch, never does."""

from __future__ import annotations

import pytest

from graph_ingest.domain.stages import Stage
from graph_ingest.settings.gc import GcSettings
from graph_ingest.waiting import wait_until
from tests.integration.pipeline import Pipeline
from tests.integration.test_applier import doc_v1
from tests.young_collections import YoungCollection

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_an_idle_applier_collects_its_young_garbage_and_its_tiers_loop_never(
    pipeline: Pipeline, young_gc_collections: list[YoungCollection]
) -> None:
    # Given an applier (its plans loop on the thread "applier", its tiers' on "retry-tiers") that
    # collects while idle once 100 young objects are pending, and no collection otherwise
    settings = pipeline.settings.model_copy(update={"gc": GcSettings(idle_collect_min=100)})
    pipeline.start_applier(settings=settings)
    # When it applies a plan and has nothing more to do
    plan = doc_v1(pipeline, "doc-idle-gc")
    pipeline.publish(plan)
    pipeline.wait_stage(plan.operation_id, Stage.COMPLETED)
    # Then its plans loop collects before it waits again
    wait_until(
        lambda: any(c.thread == "applier" for c in young_gc_collections) or None,
        timeout_s=30,
        what="the idle applier's young collection",
    )
    # and its tiers' loop, idle all along, did not
    assert not any(c.thread == "retry-tiers" for c in young_gc_collections), young_gc_collections
