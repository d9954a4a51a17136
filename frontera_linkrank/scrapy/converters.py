"""Scrapy requests <-> Frontera requests.

A Scrapy request becomes a Frontera request whose ``meta`` carries what is
needed to rebuild it later, possibly in another process after a restart:
callback and errback *names* (methods of the spider), ``cb_kwargs``, the
user's meta, priority and flags. Values that cannot be pickled are dropped
with a warning (the page database stores requests pickled, as Scrapy's
disk queues do). A plain ``GET`` with the spider's default callback and no
meta stores nothing beyond its URL.

Keys of Scrapy's own bookkeeping (``depth``, ``download_slot``,
``redirect_*``, ``retry_times``, ...) are not kept: they describe one
download, not the page.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from frontera.core.models import Request as FRequest
from frontera.core.models import Response as FResponse
from scrapy import Request

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response

logger = logging.getLogger(__name__)

SCORE_META = "linkrank_score"  # response.meta: content score of the page; request.meta: a link's hint
DONT_FRONTIER = "dont_frontier"  # request.meta: schedule through Scrapy's own queue, not the frontier
FRONTIER_META = "linkrank"  # request.meta of requests handed out by the frontier: {"fingerprint", "depth"}

_TRANSIENT = frozenset(
    (
        "depth",
        "download_slot",
        "download_latency",
        "download_timeout",
        "download_maxsize",
        "download_warnsize",
        "is_start_request",
        "redirect_urls",
        "redirect_reasons",
        "redirect_times",
        "redirect_ttl",
        "retry_times",
        "_scheme_proxy",
        "_auth_proxy",
        "ftp_password",
        "ftp_user",
        SCORE_META,
        FRONTIER_META,
        DONT_FRONTIER,
    )
)


def _method_name(func: Callable | None, spider: Spider) -> str | None:
    if func is None:
        return None
    name = getattr(func, "__name__", None)
    if name is None or getattr(spider, name, None) != func:
        raise ValueError(f"callback {func!r} is not a method of the spider: frontier requests need named callbacks")
    return name


def _picklable_meta(meta: dict[str, Any], url: str) -> dict[str, Any]:
    keep = {}
    for key, value in meta.items():
        if key in _TRANSIENT or key.startswith("_"):
            continue
        try:
            pickle.dumps(value, protocol=5)
        except Exception:
            logger.warning("meta[%r] of %s cannot be stored in the frontier and is dropped", key, url)
            continue
        keep[key] = value
    return keep


def to_frontera(request: Request, spider: Spider) -> FRequest:
    """Frontera request for a Scrapy request (raises ValueError if it cannot
    be stored: a callback that is not a spider method)."""
    meta = {}
    callback = _method_name(request.callback, spider)
    if callback is not None and callback != "parse":
        meta[b"scrapy_callback"] = callback
    errback = _method_name(request.errback, spider)
    if errback is not None:
        meta[b"scrapy_errback"] = errback
    scrapy_meta = _picklable_meta(request.meta, request.url)
    meta[b"scrapy_meta"] = scrapy_meta
    if request.cb_kwargs:
        meta[b"scrapy_cb_kwargs"] = dict(request.cb_kwargs)
    if request.priority:
        meta[b"scrapy_priority"] = request.priority
    if request.flags:
        meta[b"scrapy_flags"] = list(request.flags)
    score = request.meta.get(SCORE_META)
    if score is not None:
        meta[b"score"] = score
    # Referer is set per source page by RefererMiddleware: not a property of the page.
    headers = {k: v for k, v in request.headers.items() if k.lower() != b"referer"}
    return FRequest(
        url=request.url,
        method=request.method.encode(),
        headers=headers or None,
        cookies=request.cookies or None,
        meta=meta,
        body=request.body or "",
    )


def to_scrapy(frequest: FRequest, spider: Spider) -> Request:
    """Scrapy request for a request handed out by the frontier."""
    meta = frequest.meta
    scrapy_meta = dict(meta.get(b"scrapy_meta") or {})
    scrapy_meta[FRONTIER_META] = {
        "fingerprint": meta[b"fingerprint"].decode("ascii"),
        "depth": int(meta.get(b"depth", 0)),
    }
    scrapy_meta.setdefault("depth", int(meta.get(b"depth", 0)))
    body = frequest.body
    return Request(
        url=frequest.url,
        callback=_spider_method(spider, meta.get(b"scrapy_callback"), frequest.url),
        errback=_spider_method(spider, meta.get(b"scrapy_errback"), frequest.url),
        method=frequest.method.decode("ascii"),
        headers=frequest.headers or None,
        cookies=frequest.cookies or None,
        body=body if body else None,
        meta=scrapy_meta,
        cb_kwargs=meta.get(b"scrapy_cb_kwargs"),
        priority=meta.get(b"scrapy_priority", 0),
        flags=meta.get(b"scrapy_flags"),
        dont_filter=True,  # the frontier is the duplicate filter
    )


def _spider_method(spider: Spider, name: str | None, url: str) -> Callable | None:
    """The spider's method ``name`` (None for None). A request stored by an
    earlier version of the spider may name a method that is gone: it then
    goes to the spider's default callback, with an error in the log."""
    if name is None:
        return None
    method = getattr(spider, name, None)
    if not callable(method):
        logger.error("%s: the spider has no method %r (named in the stored request): not used", url, name)
        return None
    return method


def response_to_frontera(response: Response, status: int | None = None) -> FResponse:
    """Frontera response (with its request) for a Scrapy response.

    Its request is the one the crawl started from (the first URL of a
    redirect chain), with Scrapy's redirect chain and the spider's content
    score in its meta; fingerprints are added by the frontier's middleware.
    """
    meta = response.meta
    chain = list(meta.get("redirect_urls") or ())
    freq = FRequest(url=chain[0] if chain else response.url, meta={b"scrapy_meta": {}})
    fresp = FResponse(
        url=response.url,
        status_code=response.status if status is None else status,
        headers=dict(response.headers),
        body=response.body,
        request=freq,
    )
    if chain:
        freq.meta[b"redirect_urls"] = chain
        freq.meta[b"redirect_reasons"] = list(meta.get("redirect_reasons") or ())
    score = meta.get(SCORE_META)
    if score is not None:
        freq.meta[b"score"] = score
    return fresp
