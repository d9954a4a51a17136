"""Priority of frontier pages, one function per ``LINKRANK_POLICY``.

A priority function maps an array of page indices to float keys; higher is
fetched first, ties go to the page discovered first. Keys of a waiting page
may only grow (the queue is lazy), which holds for all policies here: AOPIC
cash and content-score hints only accumulate until the page is fetched.
"""

import numpy as np


def opic(table, aopic):
    """Greedy OPIC: largest cash first.

    Pages of ω's target set are keyed ``C - stamp`` (their effective cash
    minus the accumulator ``A``, which grows for all of them alike); see
    :func:`host_class` for how the two kinds are compared.
    """

    def keys(idx):
        cash = table.cash[idx]
        return np.where(aopic.member_mask(idx), cash - table.stamp[idx], cash)

    return keys


def fifo(table, aopic=None):
    """Discovery order (breadth-first from the seeds)."""

    def keys(idx):
        return -np.asarray(idx, np.float64)

    return keys


def score(table, aopic=None):
    """Content score: the link's own score or the best score of the crawled
    pages linking to it (``hint``)."""

    def keys(idx):
        return table.hint[idx].astype(np.float64)

    return keys


PRIORITIES = {"opic": opic, "fifo": fifo, "score": score}


def host_class(policy, aopic):
    """Queue class of a host: 0 if its unfetched pages are owed ω's cash
    (their keys exclude the accumulator ``A``, added back as the class
    offset), else 1."""
    if policy != "opic":
        return lambda h: 0
    if aopic.policy in ("all", "unfetched"):
        return lambda h: 0
    if aopic.policy == "fetched":
        return lambda h: 1
    return lambda h: 0 if h < len(aopic.host_target) and aopic.host_target[h] else 1
