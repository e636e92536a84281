"""Settings that derive values from others."""

from graph_ingest.settings import RelaySettings


def test_every_relay_of_a_schema_shares_one_transactional_id() -> None:
    relay = RelaySettings(transactional_id_prefix="ingest-prod")

    assert relay.transactional_id("graph_ingest") == "ingest-prod.graph_ingest"
    assert RelaySettings().transactional_id("s") == "graph-ingest-relay.s"
