"""``opic``: greedy OPIC, the page with the largest AOPIC cash first.

Abiteboul, Preda and Cobena, "Adaptive on-line page importance
computation", WWW 2003.

Examples
--------
>>> from frontera_linkrank.scheduling.policies import POLICIES
>>> POLICIES["opic"].cash_keys
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import Policy

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...storage.vertices import VertexTable


def cash_keys(table: VertexTable, aopic: Aopic, idx: np.ndarray) -> np.ndarray:
    """Cash of pages ``idx`` as the queue compares it.

    Pages of ω's target set are keyed ``C - stamp`` (their effective cash
    minus the accumulator ``A``, which grows for all of them alike); see
    :func:`~frontera_linkrank.scheduling.policies.host_class` for how the
    two kinds are compared.
    """
    cash = table.cash[idx]
    return np.where(aopic.member_mask(idx), cash - table.stamp[idx], cash)


class OpicPolicy(Policy):
    """Largest cash first (see the module docstring)."""

    name = "opic"
    cash_keys = True

    def keys(self, idx: np.ndarray) -> np.ndarray:
        return cash_keys(self.table, self.aopic, idx)
