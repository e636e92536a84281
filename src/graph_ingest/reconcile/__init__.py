"""Reconcile: compare what committed document states say the graph holds with what it holds,
and repair drift from each document's last committed frozen plan (DESIGN.md §5)."""
