"""``push``: the known graph's PageRank, kept current after every batch.

Keys are the push estimate of :class:`~frontera_linkrank.scoring.push.PushRank`
(the frontier core updates it after the reads of each batch): all the
PageRank mass that has reached a frontier page through the crawled
pages' links, plus its own teleport share. Mass only arrives at a page
that waits, so keys only grow, as the lazy queue needs (except with the
experimental discovery factor, ``LINKRANK_PUSH_DISCOVERY``: the frontier
then keeps a page's highest key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import KeyFunction, Policy

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...scoring.push import PushRank
    from ...scoring.ranker import RankScores
    from ...storage.vertices import VertexTable


def keys(table: VertexTable, aopic: Aopic | None = None, push: PushRank | None = None, **_: Any) -> KeyFunction:
    """The push estimate ``x + r`` of each page; with a depth discount
    ``b < 1``, the mass that reached the page through links times ``b ** depth``."""
    if push is None:
        raise ValueError("policy 'push' needs the push estimate (PushRank)")

    b = push.depth_discount
    if b == 1.0:
        def base(idx: np.ndarray) -> np.ndarray:
            return push.values(idx)
    else:
        def base(idx: np.ndarray) -> np.ndarray:
            # A waiting page's depth only shrinks and its inflow only grows: keys only grow.
            return push.inflow(idx) * b ** table.depth[idx].astype(np.float64)
    bonus = push.host_bonus
    if bonus:
        entry = HostEntries(table)
        plain = base

        def base(idx: np.ndarray) -> np.ndarray:
            return plain(idx) + bonus * entry.is_entry(idx)
    if not push.discovery:
        return base
    revealed = Revealed(table, push)
    e = push.discovery

    def f(idx: np.ndarray) -> np.ndarray:
        # Not monotone (a host's rate falls as it is explored): the frontier keeps a page's highest key.
        return base(idx) * (1.0 + revealed.per_fetch(idx)) ** e

    return f


class Revealed:
    """Per host, the pages first found on its pages per page of it crawled
    so far: what a fetch on the host has revealed. Kept from the pages
    added since the last call (their parents) and the pages the push
    estimate read since (:attr:`PushRank.read_log`): O(new pages)."""

    def __init__(self, table: VertexTable, push: PushRank) -> None:
        self.table, self.push = table, push
        self.found = np.zeros(16)  # host id -> pages first found on its pages
        self.crawled = np.zeros(16)  # host id -> its pages read
        self.seen = 0  # pages whose parent is counted

    def _grow(self, hosts: int) -> None:
        if hosts > len(self.found):
            size = max(hosts, 2 * len(self.found))
            self.found = np.concatenate((self.found, np.zeros(size - len(self.found))))
            self.crawled = np.concatenate((self.crawled, np.zeros(size - len(self.crawled))))

    def per_fetch(self, idx: np.ndarray) -> np.ndarray:
        """``g`` of the host of each page of ``idx``."""
        t = self.table
        if t.n > self.seen:
            parent = t.parent[self.seen : t.n].astype(np.int64)
            hosts = t.host[parent[parent < t.n]].astype(np.int64)  # (NO_PAGE for seeds)
            if len(hosts):
                self._grow(int(hosts.max()) + 1)
                np.add.at(self.found, hosts, 1.0)
            self.seen = t.n
        log = self.push.read_log
        if log:
            read = np.concatenate(log)
            log.clear()
            self._grow(int(t.host[read].max()) + 1)
            np.add.at(self.crawled, t.host[read].astype(np.int64), 1.0)
        h = t.host[np.asarray(idx, np.int64)].astype(np.int64)
        self._grow(int(h.max()) + 1 if len(h) else 0)
        return self.found[h] / np.maximum(self.crawled[h], 1.0)


class HostEntries:
    """The first page found of each host (the lowest page index): a fixed
    property of a page, so a bonus for it keeps keys from ever falling."""

    def __init__(self, table: VertexTable) -> None:
        self.table = table
        self.first = np.full(16, -1, np.int64)  # host id -> first page, -1: none yet
        self.seen = 0  # pages looked at so far

    def is_entry(self, idx: np.ndarray) -> np.ndarray:
        """Whether each page of ``idx`` is the first page of its host."""
        t = self.table
        if t.n > self.seen:
            hosts = t.host[self.seen : t.n].astype(np.int64)
            if len(hosts) and int(hosts.max()) >= len(self.first):
                grown = np.full(max(int(hosts.max()) + 1, 2 * len(self.first)), -1, np.int64)
                grown[: len(self.first)] = self.first
                self.first = grown
            h, at = np.unique(hosts, return_index=True)
            new = self.first[h] < 0
            self.first[h[new]] = self.seen + at[new]
            self.seen = t.n
        idx = np.asarray(idx, np.int64)
        return self.first[t.host[idx].astype(np.int64)] == idx


@dataclass(frozen=True)
class PushPolicy(Policy):
    """A policy keyed by the online push estimate (the core builds one and passes it)."""

    def key_function(self, table: VertexTable, aopic: Aopic, ranks: RankScores | None = None,
                     weight: float = 1.0, push: PushRank | None = None) -> KeyFunction:
        """The key function of this policy over ``table`` and the estimate ``push``."""
        return self.keys(table, aopic, ranks=ranks, weight=weight, push=push)


POLICY = PushPolicy("push", keys, estimate="push")
