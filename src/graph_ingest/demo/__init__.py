"""The demo: a bundled graph schema and corpus, planned and applied on the local stack."""
