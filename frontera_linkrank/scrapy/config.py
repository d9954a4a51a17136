"""Reading a Scrapy project's settings for the frontier: the
``LINKRANK_*`` settings, where the page database lives, the seeds file,
batch and slot sizes.

Where the page database lives follows Scrapy's convention for a crawl's
state (:func:`database_path`):

- ``LINKRANK_PATH`` set in the project (or with ``-s``): that database, and
  a rerun resumes it;
- else ``JOBDIR`` set: ``JOBDIR/linkrank_db``, resumed by a rerun with the
  same ``JOBDIR``, as Scrapy resumes its own queue there;
- else a fresh database in a new temporary folder, for this crawl only (as
  Scrapy's memory queue): the log names it at the start and at the end, so
  that the ``page_db_*`` tools can read it; removed at the end when the
  crawl fetched nothing. Two crawlers of one process never share one.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from typing import TYPE_CHECKING

from scrapy.utils.job import job_dir

from ..settings import LinkRankSettings

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

JOBDIR_DATABASE = "linkrank_db"  # the page database's folder name in a JOBDIR


def read_seeds_file(path: str | os.PathLike[str]) -> list[str]:
    """URLs of a seeds file: one per line, blank lines and ``#`` lines skipped.

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


def database_path(scrapy_settings: BaseSettings, spider_name: str) -> tuple[str, bool]:
    """``(path, fresh)``: where the crawl's page database lives, and
    whether it is a fresh one of this crawl only (see the module's rules)."""
    explicit = scrapy_settings.get("LINKRANK_PATH")
    if explicit:
        return str(explicit), False
    jobdir = job_dir(scrapy_settings)
    if jobdir:
        return os.path.join(jobdir, JOBDIR_DATABASE), False
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", spider_name or "spider")[:40]
    return os.path.join(tempfile.mkdtemp(prefix=f"linkrank-{name}-"), "db"), True


def linkrank_settings(scrapy_settings: BaseSettings, path: str | None = None) -> LinkRankSettings:
    """The ``LINKRANK_*`` settings of a Scrapy project, checked (a name
    that is not a LinkRank setting, a typo, is an error), with ``path`` as
    ``LINKRANK_PATH`` when given. ``LINKRANK_MAX_REQUESTS_PER_HOST`` left
    at 0 becomes the slot capacity (see ``LINKRANK_OVERUSED_SLOT_FACTOR``)."""
    attrs = {name: scrapy_settings[name] for name in scrapy_settings if name.startswith("LINKRANK_")}
    if path is not None:
        attrs["LINKRANK_PATH"] = path
    s = LinkRankSettings(attrs)  # validates (unknown names too), with the setting's name in any error
    if not s.MAX_REQUESTS_PER_HOST:
        s = LinkRankSettings(s, MAX_REQUESTS_PER_HOST=slot_capacity(_domain_concurrency(scrapy_settings), s))
    return s


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
