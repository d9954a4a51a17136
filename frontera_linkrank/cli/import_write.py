"""What ``page_db_import`` writes besides links: pages restored from a dump.

The links themselves go through the graph loader (``LinkLoader``, which
marks pages with links crawled); this module holds the other place the
import changes pages' crawl state, :func:`restore_dumped_pages`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..scheduling.lifecycle import restore
from ..storage.pagedb import PageDB


def restore_dumped_pages(
    db: PageDB, pages: np.ndarray, values: Sequence[tuple[float | int, ...]], wanted: Sequence[tuple[str, type, int]]
) -> None:
    """Pages listed in a ``page_db_dump info`` file get their dumped fields
    back, and those with crawls become CRAWLED: a state change outside a
    crawl, so the AOPIC cash they are owed is settled first.

    Parameters
    ----------
    db : PageDB
        Writer page database holding ``pages``.
    pages : numpy.ndarray
        Page indices, one per row of ``values``.
    values : sequence of tuples
        Per page, the values of the ``wanted`` fields.
    wanted : sequence of (name, type, column)
        The page-table fields the values are for (``first_crawl``...).
    """
    v = db.vertices

    def set_fields() -> None:
        if values:
            table = list(zip(*values))
            for (name, kind, _), column in zip(wanted, table):
                getattr(v, name)[pages] = np.asarray(column, np.float64 if kind is float else np.int64)
        # A dump rounds times to seconds: a crawled page keeps a positive first crawl.
        early = pages[(v.n_crawls[pages] > 0) & (v.first_crawl[pages] <= 0)]
        v.first_crawl[early] = np.maximum(v.last_crawl[early], 1.0)
        v.last_crawl[early] = np.maximum(v.last_crawl[early], v.first_crawl[early])

    restore(db, pages, set_fields)  # settles the owed cash, then CRAWLED where crawled
