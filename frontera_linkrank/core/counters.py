"""The crawl's counters (pages crawled, links, rejections...), kept in the
page database's metadata and reported by ``stats()``."""

from __future__ import annotations


class Counters(dict):
    """``{name: int}`` with :meth:`add`."""

    def add(self, key: str, k: int = 1) -> None:
        self[key] = self.get(key, 0) + k
