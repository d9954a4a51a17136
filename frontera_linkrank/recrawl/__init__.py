"""Recrawl: change detection, change-rate estimates, refresh order (ALGORITHMS.md §5)."""
