"""Which spider methods a stored request may name as its callback or errback.

The page database keeps callbacks by name, and a name read back from it
is data, possibly crafted: it may only select one of the spider's own
public methods, never something that acts on the spider or the crawl.
A name is allowed when:

- it is a plain identifier not starting with ``_`` (so no dunder such as
  ``__init__`` or ``__class__``), except the dispatchers of Scrapy's
  generic spiders (``CrawlSpider._callback`` and ``_errback``, which call
  the spider's rules, and ``SitemapSpider._parse_sitemap``) on spiders of
  those classes;
- it is not a method of ``scrapy.Spider`` itself other than ``parse``
  (``close``, ``start``, ``start_requests``, ``from_crawler``,
  ``update_settings``, ``handles_request``, ``log``...), nor the
  ``closed`` hook Scrapy calls at the end of a crawl;
- the spider's class defines it as a plain function, so that it is a
  method bound to the spider (not an instance attribute, property,
  static or class method, or another callable object); it is looked up
  without running the spider's code (``inspect.getattr_static``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from scrapy import Spider
from scrapy.spiders import CrawlSpider, SitemapSpider

# Methods of scrapy.Spider (and older ones, and the hook it calls): not callbacks.
_SPIDER_OWN = frozenset(name for name in dir(Spider) if name != "parse") | {"closed", "start_requests"}
# Scrapy's generic spiders store these private dispatchers as callbacks.
_DISPATCHERS: dict[str, type] = {"_callback": CrawlSpider, "_errback": CrawlSpider, "_parse_sitemap": SitemapSpider}


class UnusableRequest(ValueError):
    """A request handed out by the frontier that cannot be rebuilt for
    this spider (a stored callback name that is not allowed, or parts kept
    only in the memory of an earlier run)."""


def allowed_name(spider: Any, name: object) -> str | None:
    """Why ``name`` may not be a callback of ``spider``, or None if it may.

    >>> class S(Spider):
    ...     name = "s"
    ...     def parse_item(self, response): ...
    ...     def _hidden(self, response): ...
    ...     helper = staticmethod(print)
    >>> s = S()
    >>> [allowed_name(s, n) for n in ("parse_item", "parse", "_hidden", "__init__", "close", "helper", "name", 3)]
    [None, None, 'a private name', 'a private name', 'a method of scrapy.Spider', 'not a method', 'not a method', \
'not a name']
    """
    if not isinstance(name, str) or not name.isidentifier():
        return "not a name"
    if name.startswith("_"):
        base = _DISPATCHERS.get(name)
        if base is None or not isinstance(spider, base):
            return "a private name"
    elif name in _SPIDER_OWN:
        return "a method of scrapy.Spider"
    if name in getattr(spider, "__dict__", {}):
        return "not a method"
    try:
        found = inspect.getattr_static(type(spider), name)
    except AttributeError:
        return "the spider has no such method"
    if not inspect.isfunction(found):
        return "not a method"
    return None


def spider_method(spider: Any, name: object, what: str = "callback") -> Callable | None:
    """The spider's method ``name`` (None for None).

    Raises
    ------
    UnusableRequest
        ``name`` is not allowed (see the module's rules).
    """
    if name is None:
        return None
    why = allowed_name(spider, name)
    if why is not None:
        raise UnusableRequest(
            f"stored {what} name {str(name)[:80]!r} refused ({why}): only the spider's own public methods are called"
        )
    return getattr(spider, name)


def method_name(func: Callable | None, spider: Any) -> str | None:
    """The name under which ``func`` can be stored: a bound method of
    ``spider`` that :func:`spider_method` gives back; else None."""
    name = getattr(func, "__name__", None)
    if name is None or getattr(func, "__self__", None) is not spider or allowed_name(spider, name) is not None:
        return None
    return name if getattr(spider, name, None) == func else None


__all__ = ["UnusableRequest", "allowed_name", "method_name", "spider_method"]
