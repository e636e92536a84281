"""The worker processes' garbage-collector thresholds (``GRAPH_INGEST_GC__*``)."""

import gc

from graph_ingest.settings.gc import GcSettings


def tune_collector(settings: GcSettings) -> tuple[int, int, int]:
    """Set the young generation's threshold from ``settings`` and keep the older generations';
    return the thresholds now in force (``gc.get_threshold``)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(settings.young_threshold, middle, old)
    return gc.get_threshold()
