"""The table of ``frontera-linkrank`` subcommands.

Each row names a tool module of this package whose ``main(argv=None,
prog=...)`` (made by :func:`.common.tool`) runs it. The page database
tools are also installed under their Aduana-era ``page_db_*`` names:
pyproject.toml's ``[project.scripts]`` points each alias at the same
``main`` (tests/test_cli_entry.py checks the two agree).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .common import ToolMain

PROG = "frontera-linkrank"


@dataclass(frozen=True)
class Command:
    """One subcommand.

    Attributes
    ----------
    name : str
        The subcommand: ``frontera-linkrank NAME``.
    module : str
        Module of :mod:`frontera_linkrank.cli` holding its ``main``.
    summary : str
        One line for ``frontera-linkrank --help``.
    alias : str or None
        Its ``page_db_*`` script, if it has one.
    """

    name: str
    module: str
    summary: str
    alias: str | None = None

    @property
    def prog(self) -> str:
        """The program name it reports as when run as a subcommand."""
        return f"{PROG} {self.name}"

    @property
    def entry_point(self) -> str:
        """Its ``module:function`` as a console script entry point."""
        return f"{__package__}.{self.module}:main"

    def load(self) -> ToolMain:
        """Import its module (only now: the tools' imports are heavy) and return its ``main``."""
        return importlib.import_module(f".{self.module}", __package__).main


COMMANDS: tuple[Command, ...] = (
    Command("seeds", "seeds", "seeds for a new crawl from a previous crawl's page database", "page_db_seeds"),
    Command("dump", "dump", "pages or links of a page database, as text", "page_db_dump"),
    Command("find", "find", "pages whose URL matches a regular expression", "page_db_find"),
    Command("links", "links", "links into and out of one page", "page_db_links"),
    Command("path", "path", "how a page was discovered, back to a seed", "page_db_path"),
    Command("stats", "stats", "a summary of a page database", "page_db_stats"),
    Command("check", "check", "verify every invariant of a page database", "page_db_check"),
    Command("export", "export", "page fields and scores to CSV or Parquet", "page_db_export"),
    Command("import", "importer", "build a page database from a previous crawl's links", "page_db_import"),
    Command("rank", "rank", "compute PageRank and/or HITS offline and store the scores", "page_db_rank"),
    Command("serve-web", "serve_web", "serve a link graph over HTTP as a local test web"),
    Command("top", "top", "the most important pages of a page database"),
    Command("simulate", "simulate", "compare crawl policies on a link graph"),
    Command("serve-frontier", "serve_frontier", "one frontier for many spiders, through a Redis broker"),
    Command("frontier-status", "frontier_status", "state of a shared frontier and its spiders"),
    Command("serve-status", "serve_status", "a live dashboard of a crawl in the browser, with JSON and /metrics"),
)
BY_NAME = {c.name: c for c in COMMANDS}
