"""Watching the workers from outside: health endpoints fed by the loops' lifecycle hooks."""
