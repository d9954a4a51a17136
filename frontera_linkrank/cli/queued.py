"""What the frontier will fetch next: each page's key under the crawl
policy, its request priority, and the order the queue hands pages out in.

The crawl policy is the one the database was last crawled with (its
metadata names it; ``--policy`` to see another), built as the frontier
core builds it at open, from the last commit, with the default settings
(the push estimate as the crawl's close stored it or rebuilt from the
stored links, the stored ranking).
A queued page's *key* is what the queue compares: the policy's key plus
its host class's offset (AOPIC's accumulator, for the cash policies with
``LINKRANK_OMEGA_POLICY = "hosts"``). Pages are handed out by priority
first (higher first, see ``Request.priority``), then key (higher first),
then discovery (earlier first), skipping busy hosts; this view shows that
order without the hosts' politeness.
"""

from __future__ import annotations

import numpy as np

from ..scheduling.policies import POLICIES, PolicyContext, queue_keys
from ..scheduling.priority import Priorities
from ..scoring.ranker import RankScores, load_stored
from ..settings import LinkRankSettings
from ..storage.pagedb import PageDB
from ..storage.vertices import UNFETCHED
from .common import ToolError, books


def crawl_policy(db: PageDB, policy: str | None = None) -> str:
    """The policy name: ``policy``, else the database's, else the default."""
    name = policy or db.meta.get("policy") or LinkRankSettings({}).POLICY
    if name not in POLICIES:
        raise ToolError(f"unknown policy {name!r}: one of {', '.join(sorted(POLICIES))}")
    return str(name)


def policy_keys(db: PageDB, policy: str | None = None) -> tuple[str, np.ndarray]:
    """``(policy name, key of every page)``, as the queue compares them (see the module docstring)."""
    name = crawl_policy(db, policy)
    v, n = db.vertices, db.n_pages
    aopic = books(db)
    settings = LinkRankSettings({"LINKRANK_POLICY": name})
    ranks = RankScores(load_stored(db))
    built = POLICIES[name](PolicyContext(v, aopic, ranks, settings, db))
    idx = np.arange(n)
    keys = queue_keys(built, aopic, v.host[:n].astype(np.int64), idx, len(db.host_names)) if n else np.zeros(0)
    return name, keys


def priorities(db: PageDB) -> np.ndarray:
    """The request priority of every page (0 for most; those of fetched pages are not kept)."""
    p = Priorities(db)
    p.load(db.vertices)
    out = np.zeros(db.n_pages, np.int64)
    if p.levels:
        pages = np.fromiter(p.levels, np.int64, len(p.levels))
        out[pages] = np.fromiter(p.levels.values(), np.int64, len(p.levels))
    return out


def queued_pages(db: PageDB, n: int = 20, policy: str | None = None) -> tuple[str, list[tuple[str | None, int, float]]]:
    """``(policy, rows)``: the ``n`` queued pages handed out first, as
    ``(url, priority, key)``, in that order."""
    name, keys = policy_keys(db, policy)
    size = db.n_pages
    queued = np.flatnonzero(db.vertices.state[:size] == UNFETCHED)
    prio = priorities(db)
    order = queued[np.lexsort((queued, -keys[queued], -prio[queued]))][:n]
    with db.snapshot() as txn:
        urls = db.urls(order, txn)
    return name, [(u, int(prio[i]), float(keys[i])) for i, u in zip(order.tolist(), urls)]
