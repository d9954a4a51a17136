"""Frontera backend: :class:`~.backend.LinkRankBackend` and its components."""

from .backend import LinkRankBackend

__all__ = ["LinkRankBackend"]
