"""The crawl policies: how the frontier orders the pages it has not fetched.

A policy is a :class:`Policy` subclass (:mod:`.base` has the protocol)
registered in :data:`POLICIES`. Adding a policy is one module that defines
the class, plus one :func:`register` call (here for the built-in ones; a
project may register its own before the crawl starts); the
``LINKRANK_POLICY`` setting accepts every registered name.
"""

from __future__ import annotations

from .base import Batch, KeyFunction, Policy, PolicyContext, host_class, queue_keys
from .fifo import FifoPolicy
from .hybrid import HybridPolicy
from .hybrid_push import HybridPushPolicy
from .opic import OpicPolicy
from .push import PushPolicy
from .ranked import HitsPolicy, PageRankPolicy
from .score import ScorePolicy

POLICIES: dict[str, type[Policy]] = {}
"""Every crawl policy by name, in the order the docs list them."""


def register(policy: type[Policy]) -> type[Policy]:
    """Make ``policy`` a valid ``LINKRANK_POLICY`` (by its ``name``); returns
    it, so it can decorate the class.

    Raises
    ------
    ValueError
        If the name is empty or taken by another policy.
    """
    name = policy.name
    if not name or (name in POLICIES and POLICIES[name] is not policy):
        raise ValueError(f"policy name {name!r} is empty or already registered")
    POLICIES[name] = policy
    return policy


for _policy in (OpicPolicy, FifoPolicy, ScorePolicy, PageRankPolicy, HitsPolicy, HybridPolicy, HybridPushPolicy,
                PushPolicy):
    register(_policy)

__all__ = ["POLICIES", "Batch", "KeyFunction", "Policy", "PolicyContext", "host_class", "queue_keys", "register"]
