"""The crawl policies: how the frontier orders the pages it has not fetched.

A policy is one :class:`Policy` record in :data:`POLICIES`. Its ``keys``
factory returns a function from page indices to float keys (higher is
fetched first; ties go to the page discovered first). The queue is lazy,
so the key of a waiting page may only grow between two rebuilds of the
queue; every policy here keeps that rule (cash and hints only accumulate
until a page is fetched; ranking scores change only when a new ranking
arrives, and policies that use them set ``rebuild_on_ranking``).

Adding a policy is one module in this package that defines a key factory
and a ``POLICY`` record, plus one line in :data:`POLICIES` below; the
settings take their choices from here.
"""

from __future__ import annotations

from . import fifo, hybrid, hybrid_push, learned, opic, push, ranked, score
from .base import KeyFunction, Policy, host_class

POLICIES: dict[str, Policy] = {
    p.name: p for p in (opic.POLICY, fifo.POLICY, score.POLICY, ranked.PAGERANK, ranked.HITS, hybrid.POLICY,
                        hybrid_push.POLICY, push.POLICY, learned.POLICY)
}
"""Every crawl policy by name, in the order the docs list them."""

__all__ = ["POLICIES", "KeyFunction", "Policy", "host_class"]
