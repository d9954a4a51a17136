"""Scrapy requests <-> Frontera requests.

A Scrapy request becomes a Frontera request whose ``meta`` carries what is
needed to rebuild it later, possibly in another process after a restart:
callback and errback *names* (methods of the spider, see :mod:`.callbacks`),
``cb_kwargs``, the user's meta, priority and flags, all stored as plain
data (MessagePack). A plain ``GET`` with the spider's default callback and
no meta stores nothing beyond its URL.

What cannot be stored (a lambda or private callback, a response object in
``cb_kwargs``...) follows Scrapy's rule for requests its disk queues cannot
serialise: the request itself is kept in memory (``meta[KEEP_REQUEST]``,
which the scheduler takes out) and fetched as it is in this run; the page
database stores the rest, with the names of what it lacks.

Keys of Scrapy's own bookkeeping (``depth``, ``download_slot``,
``redirect_*``, ``retry_times``, ...) are not kept: they describe one
download, not the page.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from frontera.core.models import Request as FRequest
from frontera.core.models import Response as FResponse
from scrapy import Request

from ..core.codec import UNSTORED_KEY
from ..storage.packed import encodable
from .callbacks import UnusableRequest, method_name, spider_method

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response

logger = logging.getLogger(__name__)

SCORE_META = "linkrank_score"  # response.meta: content score of the page; request.meta: a link's hint
DONT_FRONTIER = "dont_frontier"  # request.meta: schedule through Scrapy's own queue, not the frontier
FRONTIER_META = "linkrank"  # request.meta of requests handed out by the frontier: {"fingerprint", "depth"}
KEEP_REQUEST = b"scrapy_request"  # Frontera meta: the Scrapy request, when parts of it cannot be stored

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


def _callback(func: Any, spider: Spider, key: bytes, meta: dict, unstored: list[str], what: str) -> None:
    if func is None:
        return
    name = method_name(func, spider)
    if name is None:
        unstored.append(what)
    elif not (key == b"scrapy_callback" and name == "parse"):
        meta[key] = name


def _plain(values: dict, unstored: list[str], what: str, skip: Any = None) -> dict:
    keep = {}
    for key, value in values.items():
        if skip is not None and skip(key):
            continue
        if encodable({key: value}):
            keep[key] = value
        else:
            unstored.append(f"{what}[{key!r}]"[:100])
    return keep


def _transient(key: Any) -> bool:
    return not isinstance(key, str) or key in _TRANSIENT or key.startswith("_")


def to_frontera(request: Request, spider: Spider) -> FRequest:
    """Frontera request for a Scrapy request. When parts of it cannot be
    stored, ``meta[KEEP_REQUEST]`` holds the request itself and
    ``meta[UNSTORED_KEY]`` names those parts."""
    meta: dict[bytes, Any] = {}
    unstored: list[str] = []
    _callback(request.callback, spider, b"scrapy_callback", meta, unstored, "callback")
    _callback(request.errback, spider, b"scrapy_errback", meta, unstored, "errback")
    meta[b"scrapy_meta"] = _plain(request.meta, unstored, "meta", skip=_transient)
    if request.cb_kwargs:
        kwargs = _plain(request.cb_kwargs, unstored, "cb_kwargs")
        if kwargs:
            meta[b"scrapy_cb_kwargs"] = kwargs
    if request.priority:
        meta[b"scrapy_priority"] = request.priority
    if request.flags:
        flags = list(request.flags)
        if encodable(flags):
            meta[b"scrapy_flags"] = flags
        else:
            unstored.append("flags")
    score = request.meta.get(SCORE_META)
    if score is not None and encodable(score):
        meta[b"score"] = score
    # Referer is set per source page by RefererMiddleware: not a property of the page.
    headers = {k: v for k, v in request.headers.items() if k.lower() != b"referer"}
    cookies = request.cookies or None
    if not encodable(cookies):
        unstored.append("cookies")
        cookies = None
    if unstored:
        meta[UNSTORED_KEY] = unstored
        meta[KEEP_REQUEST] = request
    return FRequest(
        url=request.url,
        method=request.method.encode(),
        headers=headers or None,
        cookies=cookies,
        meta=meta,
        body=request.body or "",
    )


def to_scrapy(frequest: FRequest, spider: Spider, kept: Request | None = None) -> Request:
    """Scrapy request for a request handed out by the frontier: ``kept``
    (the request of this run kept in memory) if given and the stored parts
    lack something, else rebuilt from the stored parts.

    Raises
    ------
    UnusableRequest
        The stored parts do not make a request of this spider: a callback
        or errback name that is not allowed (:mod:`.callbacks`), parts that
        were only kept in the memory of an earlier run, malformed parts.
    """
    meta = frequest.meta
    info = {"fingerprint": meta[b"fingerprint"].decode("ascii"), "depth": int(meta.get(b"depth", 0))}
    unstored = meta.get(UNSTORED_KEY)
    if kept is not None and unstored:  # (else the page's stored request came first, and is whole)
        request = kept.replace(meta={**kept.meta, FRONTIER_META: info}, dont_filter=True)
        request.meta.setdefault("depth", info["depth"])
        for name, value in (frequest.headers or {}).items():  # conditional headers of a refresh
            request.headers[name] = value
        return request
    if unstored:
        what = ", ".join(map(str, unstored)) if isinstance(unstored, list) else "parts"
        raise UnusableRequest(f"its {what[:200]} could not be stored and were only kept in memory by an earlier run")
    scrapy_meta = meta.get(b"scrapy_meta") or {}
    cb_kwargs = meta.get(b"scrapy_cb_kwargs")
    if not isinstance(scrapy_meta, dict) or not (
        cb_kwargs is None or (isinstance(cb_kwargs, dict) and all(isinstance(k, str) for k in cb_kwargs))
    ):
        raise UnusableRequest("stored meta or cb_kwargs is not a dict of names")
    scrapy_meta = {**scrapy_meta, FRONTIER_META: info}
    scrapy_meta.setdefault("depth", info["depth"])
    body = frequest.body
    try:
        return Request(
            url=frequest.url,
            callback=spider_method(spider, meta.get(b"scrapy_callback"), "callback"),
            errback=spider_method(spider, meta.get(b"scrapy_errback"), "errback"),
            method=frequest.method.decode("ascii"),
            headers=frequest.headers or None,
            cookies=frequest.cookies or None,
            body=body if body else None,
            meta=scrapy_meta,
            cb_kwargs=cb_kwargs,
            priority=meta.get(b"scrapy_priority", 0),
            flags=meta.get(b"scrapy_flags"),
            dont_filter=True,  # the frontier is the duplicate filter
        )
    except UnusableRequest:
        raise
    except (TypeError, ValueError, AttributeError, UnicodeError) as e:
        raise UnusableRequest(f"stored parts do not make a request: {type(e).__name__}: {e}"[:300]) from None


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
