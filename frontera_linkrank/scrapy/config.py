"""Reading a Scrapy project's settings for the frontier: the Frontera
settings of the scheduler's manager, the seeds file, batch and slot sizes."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from frontera import Settings as FronteraSettings

from ..settings import LinkRankSettings

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

BACKEND = "frontera_linkrank.LinkRankBackend"
FRONTERA_MIDDLEWARES = ["frontera_linkrank.backend.middleware.FingerprintMiddleware"]


def read_seeds_file(path: str | os.PathLike[str]) -> list[str]:
    """URLs of a seeds file: one per line, blank lines and ``#`` lines skipped.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("# start here\\nhttp://a.test/\\n\\n  http://b.test/x#frag  \\n")
    >>> read_seeds_file(f.name)
    ['http://a.test/', 'http://b.test/x#frag']
    >>> os.unlink(f.name)
    """
    urls = []
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                urls.append(line)
    return urls


def frontera_settings(scrapy_settings: BaseSettings) -> tuple[FronteraSettings, LinkRankSettings]:
    """Frontera settings for the manager, from a Scrapy project's settings.

    Every ``LINKRANK_*`` setting of the project is passed on; a name that is
    not a LinkRank setting (a typo) is an error. ``LINKRANK_MAX_REQUESTS_PER_HOST``
    left at 0 becomes the slot capacity (see ``LINKRANK_OVERUSED_SLOT_FACTOR``).
    """
    attrs = {name: scrapy_settings[name] for name in scrapy_settings if name.startswith("LINKRANK_")}
    s = LinkRankSettings(attrs)  # validates (unknown names too), with the setting's name in any error
    if not s.MAX_REQUESTS_PER_HOST:
        attrs["LINKRANK_MAX_REQUESTS_PER_HOST"] = slot_capacity(_domain_concurrency(scrapy_settings), s)
    attrs.update(
        BACKEND=BACKEND,
        MIDDLEWARES=FRONTERA_MIDDLEWARES,
        MAX_REQUESTS=0,  # the page budget is LINKRANK_MAX_PAGES, which survives restarts
        MAX_NEXT_REQUESTS=batch_size(scrapy_settings, s),
        AUTO_START=True,
    )
    return FronteraSettings(attributes=attrs), s


def _domain_concurrency(scrapy_settings: BaseSettings) -> int:
    return scrapy_settings.getint("CONCURRENT_REQUESTS_PER_IP") or scrapy_settings.getint(
        "CONCURRENT_REQUESTS_PER_DOMAIN"
    )


def slot_capacity(concurrency: int, s: LinkRankSettings) -> int:
    """Requests a downloader slot may hold before its host is overused."""
    return max(1, math.ceil(max(1, concurrency) * s.OVERUSED_SLOT_FACTOR))


def batch_size(scrapy_settings: BaseSettings, s: LinkRankSettings) -> int:
    """Requests asked of the frontier at a time: ``LINKRANK_BATCH_SIZE``, else ``CONCURRENT_REQUESTS``."""
    return s.BATCH_SIZE or max(1, scrapy_settings.getint("CONCURRENT_REQUESTS"))
