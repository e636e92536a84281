"""graph-ingest: documents into a knowledge graph through frozen, fingerprinted plans."""

__version__ = "0.1.0"
