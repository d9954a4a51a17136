"""Does HITS authority pay as a term of the default policy's key?

Registers ``hybrid-push-hits`` (``hybrid-push`` plus
``LINKRANK_HYBRID_WEIGHT`` times the authority of the last periodic HITS,
the queue rebuilt on every ranking) from this script, a policy the package
does not ship, then runs the ordering table (``benchmarks/ordering.py``)
with the arguments given::

    python benchmarks/hits_term.py --graphs hollins polblogs ukwa uk2007 --draws 5 \\
        --policies hybrid-push hybrid-push-hits --baselines [--host-delay 2]

docs/research/ordering.md has the results.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from frontera_linkrank.scheduling.policies import register
from frontera_linkrank.scheduling.policies.hybrid_push import HybridPushPolicy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ordering  # noqa: E402  (the table, from this directory)


class HybridPushHits(HybridPushPolicy):
    """``hybrid-push`` plus the weight times the last HITS authority."""

    name = "hybrid-push-hits"
    rankings = ("hits",)
    vectors = ("authority",)

    def keys(self, idx: np.ndarray) -> np.ndarray:
        return super().keys(idx) + self.weight * self.ranks.values("authority", idx, fill=0.0)

    def on_ranking(self, ranking: object) -> bool:
        super().on_ranking(ranking)
        return True


register(HybridPushHits)

if __name__ == "__main__":
    sys.exit(ordering.main())
