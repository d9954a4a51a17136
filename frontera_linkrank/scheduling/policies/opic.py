"""``opic``: greedy OPIC, the page with the largest AOPIC cash first.

Abiteboul, Preda and Cobena, "Adaptive on-line page importance
computation", WWW 2003.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import KeyFunction, Policy

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...storage.vertices import VertexTable


def keys(table: VertexTable, aopic: Aopic, **_: Any) -> KeyFunction:
    """Largest cash first.

    Pages of ω's target set are keyed ``C - stamp`` (their effective cash
    minus the accumulator ``A``, which grows for all of them alike); see
    :func:`~frontera_linkrank.scheduling.policies.host_class` for how the
    two kinds are compared.
    """

    def f(idx: np.ndarray) -> np.ndarray:
        cash = table.cash[idx]
        return np.where(aopic.member_mask(idx), cash - table.stamp[idx], cash)

    return f


POLICY = Policy("opic", keys, cash_keys=True)
