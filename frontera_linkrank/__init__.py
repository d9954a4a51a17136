"""frontera_linkrank: a link-analysis crawl frontier for Scrapy and Frontera.

Pages and links live in an LMDB page database; AOPIC cash is updated inline
on every crawled page; the next requests are the best pages by the chosen
policy, with per-host politeness.

Frontera settings::

    BACKEND = "frontera_linkrank.LinkRankBackend"
    LINKRANK_PATH = "crawl_db"
"""

__version__ = "0.1.0"


def __getattr__(name):
    # Lazy, so importing a submodule (say the CLI) does not import Frontera.
    if name == "LinkRankBackend":
        from .backend.backend import LinkRankBackend

        return LinkRankBackend
    raise AttributeError(name)


__all__ = ["LinkRankBackend", "__version__"]
