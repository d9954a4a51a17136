"""The frontier core: decides what a crawl fetches next, with no Frontera
or Scrapy in it (:class:`FrontierCore`). Its parts, by job:

- :mod:`.pages`: requests to pages, hosts, hints, rejected URLs;
- :mod:`.codec`: what of a request is stored, the requests handed out;
- :mod:`.batch`: a batch of fetched pages and links, applied at once;
- :mod:`.ranking`: when the periodic PageRank/HITS runs;
- :mod:`.hostkeys`: busy hosts (by name or IP);
- :mod:`.frontier_core`: the object that composes them.
"""

from .codec import OutgoingRequest
from .frontier_core import FrontierCore

__all__ = ["FrontierCore", "OutgoingRequest"]
