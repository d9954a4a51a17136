"""The request codec: what of a request the page database keeps, and the
requests the frontier hands out.

Most links are plain GETs: the page's URL and fingerprint say everything.
A request with a method, headers, cookies, a body or meta of its own keeps
those parts (stored with the page, flag ``F_EXTRAS``) and is handed out as
it came in. Meta keys the frontier manages itself are not stored.

Parts are stored as plain data (MessagePack, see
:mod:`frontera_linkrank.storage.packed`). A part that is not plain data (a
function, a response object...) cannot be stored: :func:`storable_parts`
leaves it out and lists what it left out under :data:`UNSTORED_KEY`, and
the frontier keeps the whole request in memory for the run that made it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

from ..storage.packed import encodable

SCORE_KEY = b"score"  # response meta: content score of the page; link meta: its hint
SEED_WEIGHT_KEY = b"seed_weight"  # seed request meta: share of ω's cash
FINGERPRINT_KEY = b"fingerprint"
# failed request meta: the crawler retried this fetch already (Scrapy's RetryMiddleware)
RETRIED_KEY = b"retried"
# response meta: the body's content hash computed by a remote fetcher (the body itself is not sent)
CONTENT_HASH_KEY = b"content_hash"
# Stored meta of a request some parts of which could not be stored: what
# was left out (a list of names such as "meta[b'x']").
UNSTORED_KEY = b"linkrank_unstored"

# Meta keys the frontier manages itself; not stored with a request.
INTERNAL_META = frozenset(
    (
        b"fingerprint",
        b"state",
        b"depth",
        b"id",
        b"_scr",
        b"score",
        b"domain",
        b"redirect_urls",
        b"redirect_fingerprints",
        b"redirect_domains",
        b"seed_weight",
    )
)

Parts = tuple  # (method, headers, cookies, meta, body)


class RequestLike(Protocol):
    """What the core reads of a request (a Frontera ``Request`` is one)."""

    url: str
    meta: dict
    method: bytes
    headers: Any
    cookies: Any
    body: Any


def may_have_parts(req: RequestLike) -> bool:
    """Cheap test: False for a plain GET with only a fingerprint (and an
    empty ``scrapy_meta``) in its meta. The per-link fast path of batch
    application; a meta key of the frontier's own (a ``score`` hint) makes
    it True too."""
    if req.method != b"GET" or req.headers or req.cookies or req.body:
        return True
    meta = req.meta
    for k in meta:
        if k != FINGERPRINT_KEY and (k != b"scrapy_meta" or meta[k]):
            return True
    return False


def request_parts(req: RequestLike) -> Parts | None:
    """Non-default parts of a request, or None for a plain GET."""
    meta = req.meta
    plain = req.method == b"GET" and not req.headers and not req.cookies and not req.body
    if plain:
        for k, v in meta.items():
            if k not in INTERNAL_META and (v or k != b"scrapy_meta"):
                plain = False
                break
        if plain:
            return None
    extra = {k: v for k, v in meta.items() if k not in INTERNAL_META and (v or k != b"scrapy_meta")}
    return (req.method, req.headers, req.cookies, extra, req.body)


def _name(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 80 else text[:77] + "..."


def storable_parts(parts: Parts) -> tuple[Parts, list[str]]:
    """``parts`` without what cannot be stored, and the names of what was
    left out (also listed in the stored meta under :data:`UNSTORED_KEY`).
    A meta value that is a dict loses only its keys that cannot be stored.

    >>> f = lambda: 1
    >>> parts, missing = storable_parts((b"GET", None, None, {b"a": 1, b"s": {"ok": 2, "f": f}, b"g": f}, b""))
    >>> parts[3]
    {b'a': 1, b's': {'ok': 2}, b'linkrank_unstored': ["meta[b's']['f']", "meta[b'g']"]}
    >>> missing
    ["meta[b's']['f']", "meta[b'g']"]
    """
    method, headers, cookies, meta, body = parts
    missing: list[str] = []

    def keep(name: str, value: Any, default: Any) -> Any:
        if encodable(value):
            return value
        missing.append(name)
        return default

    method, headers = keep("method", method, b"GET"), keep("headers", headers, None)
    cookies, body = keep("cookies", cookies, None), keep("body", body, b"")
    stored: dict = {}
    for k, v in meta.items():
        if encodable({k: v}):
            stored[k] = v
        elif isinstance(v, dict) and encodable(k):
            stored[k] = {}
            for sk, sv in v.items():
                if encodable({sk: sv}):
                    stored[k][sk] = sv
                else:
                    missing.append(f"meta[{_name(k)}][{_name(sk)}]")
        else:
            missing.append(f"meta[{_name(k)}]")
    if missing:
        stored[UNSTORED_KEY] = list(missing)
    return (method, headers, cookies, stored, body), missing


def _text(value: Any) -> bool:
    return isinstance(value, (bytes, str))


def _header_value(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_text(x) or isinstance(x, int) for x in value)
    return _text(value) or (isinstance(value, int) and not isinstance(value, bool))


def _cookie_map(value: Any) -> bool:
    return isinstance(value, dict) and all(
        _text(k) and (value[k] is None or _text(value[k]) or isinstance(value[k], (int, float))) for k in value)


def malformed_parts(parts: Any) -> list[str]:
    """Names of the parts of a request ``(method, headers, cookies, meta,
    body)`` that no crawler could build a request from (wrong types), or
    ``["parts"]`` if ``parts`` is not such a tuple; ``[]`` when well formed.
    Checked before parts are stored and before a stored request is handed
    out, so that one caller's (or one broker writer's) odd request is
    refused on its own instead of failing later for the whole batch.

    >>> malformed_parts((b"POST", {b"X-A": [b"1"]}, {"c": "v"}, {b"k": 1}, b"q=1"))
    []
    >>> malformed_parts((b"GET", 5, "x", {}, 7))
    ['headers', 'cookies', 'body']
    """
    if not isinstance(parts, (tuple, list)) or len(parts) != 5:
        return ["parts"]
    method, headers, cookies, meta, body = parts
    bad = []
    if not (isinstance(method, bytes) and 0 < len(method) <= 32 and method.isalpha() and method.isascii()):
        bad.append("method")
    if headers is not None and not (
            isinstance(headers, dict) and all(_text(k) and _header_value(v) for k, v in headers.items())):
        bad.append("headers")
    if cookies is not None and not (_cookie_map(cookies) or (
            isinstance(cookies, (list, tuple)) and all(_cookie_map(c) for c in cookies))):
        bad.append("cookies")
    if not isinstance(meta, dict) or not all(_text(k) for k in meta):
        bad.append("meta")
    else:  # stored without its malformed parts (PageRegistry): still refused
        flagged = meta.get(UNSTORED_KEY)
        if isinstance(flagged, list):
            bad += [n[10:] for n in flagged if isinstance(n, str) and n.startswith("malformed ")]
    if body is not None and not _text(body):
        bad.append("body")
    return bad


def as_score(value: Any) -> float | None:
    """A finite float score, or None when ``value`` is not one."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


class OutgoingRequest:
    """A request handed out by a core that has no request model of its own
    (the adapters pass theirs: Frontera's ``Request``)."""

    def __init__(self, url: str, method: bytes = b"GET", headers: Any = None, cookies: Any = None,
                 meta: dict | None = None, body: Any = b"") -> None:
        self.url = url
        self.method = method
        self.headers = headers or {}
        self.cookies = cookies or {}
        self.meta = meta if meta is not None else {}
        self.body = body


RequestFactory = Callable[..., Any]


def build_requests(factory: RequestFactory, urls: list[str], fps_hex: bytes, depths: list[int],
                   parts: dict[int, Parts], conditional: dict[int, dict], pages: list[int]) -> list[Any]:
    """Requests for the leased ``pages`` (in order): URL, stored parts,
    conditional headers of a refresh, and the frontier's meta
    (``fingerprint`` as 40 hex bytes, ``depth``)."""
    out = []
    for k, (p, url) in enumerate(zip(pages, urls)):
        stored = parts.get(p)
        cond = conditional.get(p)
        if stored is None:
            meta = {b"scrapy_meta": {}}
            req = factory(url=url, meta=meta, headers=cond)
        else:
            method, headers, cookies, extra, body = stored
            meta = dict(extra)
            meta.setdefault(b"scrapy_meta", {})
            if cond:
                headers = {**(headers or {}), **cond}
            req = factory(url=url, method=method, headers=headers, cookies=cookies, meta=meta, body=body)
        meta[FINGERPRINT_KEY] = fps_hex[40 * k : 40 * k + 40]
        meta[b"depth"] = depths[k]
        out.append(req)
    return out
