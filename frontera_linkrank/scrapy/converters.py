"""Scrapy requests <-> the frontier's requests, by Scrapy's own rules.

A Scrapy request enters the frontier as a :class:`~..core.codec.OutgoingRequest`
(URL, method, headers, cookies, body and a ``meta`` of bytes keys) whose
meta carries what rebuilds it later, possibly in another process after a
restart: what Scrapy's ``Request.to_dict`` keeps (the request of its disk
queues), as plain data (MessagePack):

=========================  ====================================================
stored meta key            Scrapy attribute
=========================  ====================================================
``b"scrapy_callback"``     ``callback``, by name (a method of the spider)
``b"scrapy_errback"``      ``errback``, by name
``b"scrapy_meta"``         ``meta``, less one download's bookkeeping (below)
``b"scrapy_cb_kwargs"``    ``cb_kwargs``
``b"scrapy_priority"``     ``priority`` (when not 0)
``b"scrapy_flags"``        ``flags``
``b"scrapy_dont_filter"``  ``dont_filter`` (when true)
``b"scrapy_encoding"``     ``encoding`` (when not utf-8)
``b"scrapy_class"``        the request class, when not ``scrapy.Request``
``b"scrapy_attrs"``        the other attributes of that class (``dumps_kwargs``)
=========================  ====================================================

A plain GET with no callback, no meta and nothing else stores nothing
beyond its URL. Meta keys that describe one download, not the request
(``depth``, which the frontier tracks itself, ``download_latency``,
``redirect_*``, ``retry_times``, the proxy middleware's private keys) are not
stored; everything else is, ``download_slot`` included.

What cannot be stored (a lambda or private callback, a response object in
``cb_kwargs``...) follows Scrapy's rule for requests its disk queues cannot
serialise: the request itself is kept in memory (``meta[KEEP_REQUEST]``,
which the scheduler takes out) and fetched as it is in this run; the page
database stores the rest, with the names of what it lacks.

A request class is stored by its import path and, when read back, only
taken from a module that is already imported (the spider's own or
Scrapy's): nothing read from the page database imports or runs code.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.http.request import NO_CALLBACK

from ..core.codec import FINGERPRINT_KEY, SCORE_KEY, UNSTORED_KEY, OutgoingRequest
from ..storage.identity import request_key
from ..storage.packed import encodable
from .callbacks import UnusableRequest, method_name, spider_method

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response

logger = logging.getLogger(__name__)

SCORE_META = "linkrank_score"  # response.meta: content score of the page; request.meta: a link's hint
DONT_FRONTIER = "dont_frontier"  # request.meta: schedule through Scrapy's own queue, not the frontier
FRONTIER_META = "linkrank"  # request.meta of requests handed out by the frontier: {"key", "depth", "url"}
KEEP_REQUEST = b"scrapy_request"  # frontier meta: the Scrapy request, when parts of it cannot be stored
NO_CALLBACK_NAME = "scrapy.NO_CALLBACK"  # stored name of Scrapy's NO_CALLBACK marker

# One download's bookkeeping, not the request's (set by the downloader and its middlewares).
TRANSIENT_META = frozenset(
    (
        "depth",
        "download_latency",
        "redirect_urls",
        "redirect_reasons",
        "redirect_times",
        "redirect_ttl",
        "retry_times",
        "_scheme_proxy",
        "_auth_proxy",
        SCORE_META,
        FRONTIER_META,
        DONT_FRONTIER,
    )
)
_BASE_ATTRIBUTES = frozenset(Request.attributes)


class FetchedPage:
    """A response as the frontier core reads it: ``url``, ``status_code``,
    ``headers``, ``body``, ``meta`` (bytes keys) and its ``request``."""

    __slots__ = ("url", "status_code", "headers", "body", "meta", "request")

    def __init__(self, url: str, status_code: int, headers: Any, body: bytes, meta: dict,
                 request: OutgoingRequest) -> None:
        self.url = url
        self.status_code = status_code
        self.headers = headers
        self.body = body
        self.meta = meta
        self.request = request


def _callback(func: Any, spider: Spider, key: bytes, meta: dict, unstored: list[str], what: str) -> None:
    if func is None:
        return
    if func is NO_CALLBACK:
        meta[key] = NO_CALLBACK_NAME
        return
    name = method_name(func, spider)
    if name is None:
        unstored.append(what)
    else:
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
    return not isinstance(key, str) or key in TRANSIENT_META


def key_hex(request: Request) -> bytes:
    """The frontier key of a Scrapy request (40 hex digits, see
    :func:`~frontera_linkrank.storage.identity.request_key`).

    Raises
    ------
    RejectedURL
        The URL cannot be canonicalised.
    """
    verbatim = bool(request.meta.get("verbatim_url"))
    return request_key(request.url, request.method, request.body, verbatim).hex().encode("ascii")


def _class_parts(request: Request, meta: dict, unstored: list[str]) -> None:
    cls = type(request)
    if cls is Request:
        return
    meta[b"scrapy_class"] = f"{cls.__module__}.{cls.__qualname__}"
    extra = {a: getattr(request, a, None) for a in cls.attributes if a not in _BASE_ATTRIBUTES}
    if extra:
        meta[b"scrapy_attrs"] = _plain(extra, unstored, "attribute")


def to_frontier(request: Request, spider: Spider, key: bytes | None = None) -> OutgoingRequest:
    """The frontier's request for a Scrapy request, its key (40 hex
    digits, computed when not given) in ``meta[b"fingerprint"]``. When parts
    of it cannot be stored, ``meta[KEEP_REQUEST]`` holds the request itself
    and ``meta[UNSTORED_KEY]`` names those parts.

    Raises
    ------
    RejectedURL
        The URL cannot be canonicalised (when ``key`` is not given).
    """
    meta: dict[bytes, Any] = {FINGERPRINT_KEY: key if key is not None else key_hex(request)}
    unstored: list[str] = []
    _callback(request.callback, spider, b"scrapy_callback", meta, unstored, "callback")
    _callback(request.errback, spider, b"scrapy_errback", meta, unstored, "errback")
    stored_meta = _plain(request.meta, unstored, "meta", skip=_transient) if request.meta else {}
    if stored_meta:
        meta[b"scrapy_meta"] = stored_meta
    if request.cb_kwargs:
        kwargs = _plain(request.cb_kwargs, unstored, "cb_kwargs")
        if kwargs:
            meta[b"scrapy_cb_kwargs"] = kwargs
    if request.priority:
        meta[b"scrapy_priority"] = request.priority
    if request.dont_filter:
        meta[b"scrapy_dont_filter"] = True
    if request.encoding != "utf-8":
        meta[b"scrapy_encoding"] = request.encoding
    if request.flags:
        flags = list(request.flags)
        if encodable(flags):
            meta[b"scrapy_flags"] = flags
        else:
            unstored.append("flags")
    _class_parts(request, meta, unstored)
    score = request.meta.get(SCORE_META)
    if score is not None and encodable(score):
        meta[SCORE_KEY] = score
    # Referer is set per source page by RefererMiddleware: not a property of the page.
    headers = {k: v for k, v in request.headers.items() if k.lower() != b"referer"}
    cookies = request.cookies or None
    if not encodable(cookies):
        unstored.append("cookies")
        cookies = None
    if unstored:
        meta[UNSTORED_KEY] = unstored
        meta[KEEP_REQUEST] = request
    return OutgoingRequest(request.url, request.method.encode("ascii"), headers or None, cookies, meta,
                           request.body or b"")


def _request_class(name: Any) -> type[Request]:
    """The request class stored as ``name``, from the modules already imported."""
    if name is None:
        return Request
    if not isinstance(name, str) or "." not in name:
        raise UnusableRequest("stored request class is not a name")
    module, _, qualname = name.rpartition(".")
    obj: Any = sys.modules.get(module)
    if obj is None:
        raise UnusableRequest(f"stored request class {name[:100]!r}: its module is not imported")
    obj = getattr(obj, qualname, None)
    if not (isinstance(obj, type) and issubclass(obj, Request)):
        raise UnusableRequest(f"stored request class {name[:100]!r} is not a scrapy.Request class")
    return obj


def _method(spider: Spider, name: Any, what: str) -> Any:
    return NO_CALLBACK if name == NO_CALLBACK_NAME else spider_method(spider, name, what)


def _dict_of_names(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and all(isinstance(k, str) for k in value))


def to_scrapy(frequest: Any, spider: Spider, kept: Request | None = None) -> Request:
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
    fp = meta[FINGERPRINT_KEY]
    info = {"key": fp.decode("ascii") if isinstance(fp, bytes) else str(fp), "depth": int(meta.get(b"depth", 0)),
            "url": frequest.url}
    unstored = meta.get(UNSTORED_KEY)
    if kept is not None and unstored:  # (else the page's stored request came first, and is whole)
        request = kept.replace(meta={**kept.meta, FRONTIER_META: info})
        request.meta.setdefault("depth", info["depth"])
        for name, value in (frequest.headers or {}).items():  # conditional headers of a refresh
            request.headers[name] = value
        return request
    if unstored:
        what = ", ".join(map(str, unstored)) if isinstance(unstored, list) else "parts"
        raise UnusableRequest(f"its {what[:200]} could not be stored and were only kept in memory by an earlier run")
    scrapy_meta = meta.get(b"scrapy_meta") or {}
    cb_kwargs = meta.get(b"scrapy_cb_kwargs")
    attrs = meta.get(b"scrapy_attrs")
    if not isinstance(scrapy_meta, dict) or not (_dict_of_names(cb_kwargs) and _dict_of_names(attrs)):
        raise UnusableRequest("stored meta, cb_kwargs or attributes are not a dict of names")
    scrapy_meta = {**scrapy_meta, FRONTIER_META: info}
    scrapy_meta.setdefault("depth", info["depth"])
    cls = _request_class(meta.get(b"scrapy_class"))
    kwargs = {k: v for k, v in (attrs or {}).items() if k in cls.attributes and k not in _BASE_ATTRIBUTES}
    try:
        return cls(
            url=frequest.url,
            callback=_method(spider, meta.get(b"scrapy_callback"), "callback"),
            errback=_method(spider, meta.get(b"scrapy_errback"), "errback"),
            method=frequest.method.decode("ascii"),
            headers=frequest.headers or None,
            cookies=frequest.cookies or None,
            body=frequest.body or None,
            meta=scrapy_meta,
            cb_kwargs=cb_kwargs,
            priority=meta.get(b"scrapy_priority", 0),
            flags=meta.get(b"scrapy_flags"),
            dont_filter=bool(meta.get(b"scrapy_dont_filter")),
            encoding=meta.get(b"scrapy_encoding", "utf-8"),
            **kwargs,
        )
    except UnusableRequest:
        raise
    except (TypeError, ValueError, AttributeError, UnicodeError, LookupError) as e:
        raise UnusableRequest(f"stored parts do not make a request: {type(e).__name__}: {e}"[:300]) from None


def fetched_page(response: Response, url: str, key: bytes, chain: list[str] | None = None) -> FetchedPage:
    """The frontier's view of a response to the request handed out for the
    page ``key`` (40 hex digits) at ``url``.

    With ``chain`` (the URLs before the response's, first the page's own:
    Scrapy's ``redirect_urls``) the response was redirected; without, it
    is the page's response whatever its URL (a downloader middleware may
    have changed it).
    """
    # One meta for the response and its request, as in Frontera's model
    # (the shared frontier's client reads the request's).
    meta: dict[bytes, Any] = {FINGERPRINT_KEY: key}
    final = url
    if chain:
        meta[b"redirect_urls"] = chain
        meta[b"redirect_reasons"] = list(response.meta.get("redirect_reasons") or ())
        final = response.url
    score = response.meta.get(SCORE_META)
    if score is not None:
        meta[SCORE_KEY] = score
    request = OutgoingRequest(url, meta=meta)
    return FetchedPage(final, response.status, dict(response.headers), response.body, meta, request)
