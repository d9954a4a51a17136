"""Recrawl: change detection, change-rate estimates, refresh order (docs/algorithms.md §5)."""
