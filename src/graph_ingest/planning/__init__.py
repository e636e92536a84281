"""Planning: ingest request -> extraction -> validation -> resolution -> version diff -> frozen plan."""
