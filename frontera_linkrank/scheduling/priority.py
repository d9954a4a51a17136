"""Priority of frontier pages, one function per ``LINKRANK_POLICY``.

A priority function maps an array of page indices to float keys; higher is
fetched first, ties go to the page discovered first. Keys of a waiting page
may only grow (the queue is lazy), which holds for all policies here: AOPIC
cash and content-score hints only accumulate until the page is fetched, and
ranking scores change only when a new ranking arrives, when the backend
rebuilds the queue. Each factory takes the page table, the AOPIC books and,
as keywords, the last ranking (``ranks``) and the hybrid ``weight``.
"""

import numpy as np


def opic(table, aopic, **_):
    """Greedy OPIC: largest cash first.

    Pages of ω's target set are keyed ``C - stamp`` (their effective cash
    minus the accumulator ``A``, which grows for all of them alike); see
    :func:`host_class` for how the two kinds are compared.
    """

    def keys(idx):
        cash = table.cash[idx]
        return np.where(aopic.member_mask(idx), cash - table.stamp[idx], cash)

    return keys


def fifo(table, aopic=None, **_):
    """Discovery order (breadth-first from the seeds)."""

    def keys(idx):
        return -np.asarray(idx, np.float64)

    return keys


def score(table, aopic=None, **_):
    """Content score: the link's own score or the best score of the crawled
    pages linking to it (``hint``)."""

    def keys(idx):
        return table.hint[idx].astype(np.float64)

    return keys


def pagerank(table, aopic=None, ranks=None, name="pagerank", **_):
    """PageRank of the last periodic ranking; pages found since then have
    no score yet and come after the ranked ones, in discovery order.

    Keys only change when a new ranking arrives, and the frontier is then
    rebuilt, so the lazy queue's rule (keys only grow) holds."""

    def keys(idx):
        return ranks.values(name, idx, fill=0.0)

    return keys


def hits(table, aopic=None, ranks=None, **_):
    """HITS authority of the last periodic ranking (as :func:`pagerank`)."""
    return pagerank(table, aopic, ranks, name="authority")


def hybrid(table, aopic, ranks=None, weight=1.0, **_):
    """AOPIC cash plus ``weight`` times the PageRank of the last ranking.

    The ranking knows the link structure around pages found before it;
    pages found since are ranked by their cash alone, which AOPIC keeps
    current on every read. Both terms sum to at most 1 over the pages. The
    cash part is keyed like :func:`opic` (same host classes and offsets);
    the ranking part is fixed between rankings, so keys only grow."""
    cash = opic(table, aopic)

    def keys(idx):
        return cash(idx) + weight * ranks.values("pagerank", idx, fill=0.0)

    return keys


PRIORITIES = {"opic": opic, "fifo": fifo, "score": score, "pagerank": pagerank, "hits": hits, "hybrid": hybrid}


def host_class(policy, aopic):
    """Queue class of a host: 0 if its unfetched pages are owed ω's cash
    (their keys exclude the accumulator ``A``, added back as the class
    offset), else 1."""
    if policy not in ("opic", "hybrid"):
        return lambda h: 0
    if aopic.policy in ("all", "unfetched"):
        return lambda h: 0
    if aopic.policy == "fetched":
        return lambda h: 1
    return lambda h: 0 if h < len(aopic.host_target) and aopic.host_target[h] else 1
