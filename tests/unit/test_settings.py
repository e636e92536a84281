"""Settings that derive values from others."""

import pytest
from pydantic import ValidationError

from graph_ingest.settings import Settings
from graph_ingest.settings.applier import ApplierSettings
from graph_ingest.settings.kafka import TopicSettings
from graph_ingest.settings.relay import RelaySettings


def test_every_relay_of_a_schema_shares_one_transactional_id() -> None:
    relay = RelaySettings(transactional_id_prefix="ingest-prod")

    assert relay.transactional_id("graph_ingest") == "ingest-prod.graph_ingest"
    assert RelaySettings().transactional_id("s") == "graph-ingest-relay.s"


def test_the_retry_ladder_names_one_tier_topic_per_delay_then_the_dlq() -> None:
    topics = TopicSettings(plans="p", retry_delays_s=(0.25, 1, 5, 120))
    assert topics.retry_tiers == [
        ("p.retry.250ms", 0.25),
        ("p.retry.1s", 1),
        ("p.retry.5s", 5),
        ("p.retry.120s", 120),
    ]
    assert topics.dlq == "p.dlq"


def test_a_retry_delay_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="positive"):
        TopicSettings(retry_delays_s=(1, 0))


def test_two_retry_delays_may_not_name_one_tier_topic() -> None:
    # (creating one topic twice in one request crashed librdkafka's admin client: a segfault)
    with pytest.raises(ValidationError, match=r"p\.retry\.1500ms twice"):
        TopicSettings(plans="p", retry_delays_s=(1.5, 1.5, 3))
    with pytest.raises(ValidationError, match=r"p\.retry\.250ms twice"):
        TopicSettings(plans="p", retry_delays_s=(0.25, 0.2501))


def test_the_degradation_window_comes_from_the_environment_and_must_be_positive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ApplierSettings().degradation_stable_s == 60.0
    monkeypatch.setenv("GRAPH_INGEST_APPLIER__DEGRADATION_STABLE_S", "2.5")
    assert Settings().applier.degradation_stable_s == 2.5
    with pytest.raises(ValidationError, match="degradation_stable_s"):
        ApplierSettings(degradation_stable_s=0)


def test_published_outbox_rows_outlive_a_dlq_reindex(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().relay.published_retention_s == 3600.0
    monkeypatch.setenv("GRAPH_INGEST_DLQ__REINDEX_TIMEOUT_S", "600")
    monkeypatch.setenv("GRAPH_INGEST_RELAY__PUBLISHED_RETENTION_S", "600")
    with pytest.raises(ValidationError, match=r"published_retention_s \(600\) must exceed"):
        Settings()
    monkeypatch.setenv("GRAPH_INGEST_RELAY__PUBLISHED_RETENTION_S", "601")
    assert Settings().relay.published_retention_s == 601.0
