"""``learned``: a linear model on features the frontier keeps, fitted offline.

An experiment (see docs/ordering.md, "A learned combination"): the key
of a waiting page is ``w · f`` with

- ``log(x + r)``: the push estimate (known graph's PageRank, unnormalised);
- ``log(1 + in-links)``: distinct crawled pages linking to the page;
- ``depth``: links from the nearest seed;
- ``log(1 + template)``: the host template, the page's same-host in-links
  over its host's crawled pages, times its host's known pages (where the
  host's unseen pages are expected to link).

The weights ``w`` come from ``learned_weights.json`` beside this module,
fitted by ``benchmarks/learned_order.py`` (logistic regression for "in the
best 1% of the frontier by true PageRank" on snapshots of simulated
crawls). The link counts are kept from the rows the push estimate stores,
once per newly crawled page (a one-pass crawl: a recrawled page's links
are not counted again). Keys can fall (the template falls as a host's
crawled pages grow); the frontier keeps the highest key a page has had
since the queue was last rebuilt, as its lazy queue requires.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .push import PushPolicy

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...scoring.push import PushRank
    from ...storage.vertices import VertexTable
    from .base import KeyFunction

FEATURES = ("log_push", "log_indeg", "depth", "log_template")
"""The model's inputs, in the order of its weights."""


def load_weights(path: str | None = None) -> np.ndarray:
    """The weights of :data:`FEATURES` from a JSON file (the shipped one by default)."""
    path = path or os.path.join(os.path.dirname(__file__), "learned_weights.json")
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    if list(spec.get("features", ())) != list(FEATURES):
        raise ValueError(f"{path}: features {spec.get('features')} are not {list(FEATURES)}")
    return np.asarray(spec["weights"], np.float64)


WEIGHTS: np.ndarray = load_weights()
"""Weights in use (a benchmark may replace them to fit leave-one-graph-out)."""


class LinkCounts:
    """Known in-links, same-host in-links and pages per host, kept from the
    push estimate's stored rows (each crawled page counted once)."""

    def __init__(self, table: VertexTable, push: PushRank) -> None:
        self.table, self.push = table, push
        self.counted = np.zeros(0, bool)
        self.indeg = np.zeros(0)
        self.same_in = np.zeros(0)
        self.h_known = np.zeros(0)
        self.h_crawled = np.zeros(0)
        self.seen = 0  # pages whose host is counted in h_known
        self.version = (-1, -1)

    def _grow(self, n: int, hosts: int) -> None:
        for name, size in (("counted", n), ("indeg", n), ("same_in", n), ("h_known", hosts), ("h_crawled", hosts)):
            old = getattr(self, name)
            if size > len(old):
                grown = np.zeros(max(size, 2 * len(old)), old.dtype)
                grown[: len(old)] = old
                setattr(self, name, grown)

    def update(self) -> None:
        """Count the pages crawled and found since the last call."""
        t, p = self.table, self.push
        version = (p.n_edges, t.n)
        if version == self.version:
            return
        self.version = version
        n = max(t.n, p.n)
        host = t.host
        fresh = host[self.seen : t.n]
        self._grow(n, max(len(self.h_known), int(fresh.max()) + 1 if len(fresh) else 1))
        np.add.at(self.h_known, fresh.astype(np.int64), 1.0)
        self.seen = t.n
        new = np.flatnonzero((p.deg[: p.n] >= 0) & ~self.counted[: p.n])
        if not len(new):
            return
        self.counted[new] = True
        deg = p.deg[new]
        total = int(deg.sum())
        offsets = np.repeat(p.start[new] - np.concatenate(([0], np.cumsum(deg)[:-1])), deg)
        dst = p.pool[offsets + np.arange(total)]
        src = np.repeat(new, deg)
        np.add.at(self.indeg, dst, 1.0)
        same = host[dst] == host[src]
        np.add.at(self.same_in, dst[same], 1.0)
        np.add.at(self.h_crawled, host[new].astype(np.int64), 1.0)

    def features(self, idx: np.ndarray) -> np.ndarray:
        """The :data:`FEATURES` of pages ``idx`` (rows)."""
        self.update()
        idx = np.asarray(idx, np.int64)
        h = self.table.host[idx].astype(np.int64)
        template = self.same_in[idx] / np.maximum(self.h_crawled[h], 1.0) * self.h_known[h]
        return np.column_stack([np.log(self.push.values(idx)), np.log1p(self.indeg[idx]),
                                self.table.depth[idx].astype(np.float64), np.log1p(template)])


def keys(table: VertexTable, aopic: Aopic | None = None, push: PushRank | None = None, **_: Any) -> KeyFunction:
    """``w · f`` of each page (module docstring)."""
    if push is None:
        raise ValueError("policy 'learned' needs the push estimate (PushRank)")
    counts = LinkCounts(table, push)

    def f(idx: np.ndarray) -> np.ndarray:
        return counts.features(idx) @ WEIGHTS

    return f


@dataclass(frozen=True)
class LearnedPolicy(PushPolicy):
    """Keyed by the learned model over the push estimate and link counts."""


POLICY = LearnedPolicy("learned", keys, estimate="push")
