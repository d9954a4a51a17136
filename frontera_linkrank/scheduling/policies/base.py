"""The policy record and host classes (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...scoring.ranker import RankScores
    from ...storage.vertices import VertexTable

KeyFunction = Callable[[np.ndarray], np.ndarray]
"""Keys of pages ``idx`` (an int64 array): float64, higher first."""


@dataclass(frozen=True)
class Policy:
    """One crawl policy.

    Attributes
    ----------
    name : str
        The value of ``LINKRANK_POLICY``.
    keys : callable
        ``keys(table, aopic, ranks=..., weight=...) -> KeyFunction``.
    rankings : tuple of str
        Periodic rankings the policy needs (``"pagerank"``, ``"hits"``).
    rebuild_on_ranking : bool
        A new ranking changes the keys: the queue is rebuilt when one is
        installed.
    uses_hints : bool
        Keys read the pages' ``hint`` (content scores): seeds get a hint of
        at least 1 and crawled pages pass their score on to their links.
    cash_keys : bool
        Keys are AOPIC cash, so hosts are split into the classes of
        :func:`host_class`.
    estimate : str
        What the simulator reports as the policy's importance estimate:
        ``"importance"`` (AOPIC), ``"push"`` (the push estimate, which the
        core then keeps) or a stored ranking vector (``"pagerank"``,
        ``"authority"``).
    rescales : bool
        The key function has ``due()`` and ``rescale()``: keys are
        scaled by a total that grows with the crawl, taken afresh when
        ``due()`` (after a batch is applied), and the queue is rebuilt.
    """

    name: str
    keys: Callable[..., KeyFunction]
    rankings: tuple[str, ...] = ()
    rebuild_on_ranking: bool = False
    uses_hints: bool = False
    cash_keys: bool = False
    estimate: str = "importance"
    rescales: bool = False

    def key_function(self, table: VertexTable, aopic: Aopic, ranks: RankScores | None = None,
                     weight: float = 1.0) -> KeyFunction:
        """The key function of this policy over ``table``."""
        return self.keys(table, aopic, ranks=ranks, weight=weight)

    def host_class(self, aopic: Aopic) -> Callable[[int], int]:
        """Queue class of a host (see :func:`host_class`)."""
        return host_class(self, aopic)


def host_class(policy: Policy, aopic: Aopic) -> Callable[[int], int]:
    """Queue class of a host: 0 if its unfetched pages are owed ω's cash
    (their keys exclude the accumulator ``A``, added back as the class
    offset), else 1. Only policies keyed by cash use classes."""
    if not policy.cash_keys or aopic.policy in ("all", "unfetched"):
        return lambda h: 0
    if aopic.policy == "fetched":
        return lambda h: 1
    target: Any = aopic.host_target
    return lambda h: 0 if h < len(target) and target[h] else 1
