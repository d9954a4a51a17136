"""A URL fingerprint middleware that never raises.

Frontera's ``UrlFingerprintMiddleware`` computes ``sha1(canonicalize_url(url))``
but raises on URLs ``canonicalize_url`` cannot handle (a lone surrogate
from invalid UTF-8, ``http://[bad``, a port out of range), and the exception
reaches the crawler. This one computes the same fingerprint and, when it
cannot, leaves ``meta[b'fingerprint']`` unset: the backend then rejects the
URL with a reason, logs and counts it, and goes on with the rest. Whatever a
caller put in ``meta[b'redirect_urls']``, it leaves there a list of URLs
that Frontera's canonical solver can use (or nothing), with their
fingerprints in ``meta[b'redirect_fingerprints']``.

    MIDDLEWARES = ["frontera_linkrank.backend.middleware.FingerprintMiddleware"]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from frontera.core.components import Middleware

from ..core.inputs import url_text
from ..storage.urls import RejectedURL, fingerprint

if TYPE_CHECKING:
    from frontera.core.models import Request, Response

_Obj = TypeVar("_Obj", "Request", "Response")  # _add returns what it was given


def _hex(url: Any) -> bytes | None:
    try:
        return fingerprint(url).hex().encode("ascii")
    except RejectedURL:  # not a URL (or not a string at all)
        return None


def _redirects(meta: dict, own: bytes | None) -> None:
    """Set ``meta[b'redirect_fingerprints']``, one per redirect URL.

    Frontera's canonical solver (on by default) appends to both lists and
    renames the page to the first URL, so they are left as lists of URLs it
    can use: a lone URL becomes a list of one, entries that are not URLs
    are left out (the frontier ignores them anyway), and a redirect list
    with nothing usable in it, or on a page whose own URL is not one, is
    removed.
    """
    urls = meta[b"redirect_urls"]
    if isinstance(urls, (str, bytes)):
        urls = [urls]
    elif not isinstance(urls, (list, tuple)):
        urls = []
    texts = [url_text(u) for u in urls]  # bytes in UTF-8 become str
    fps = [None if t is None else _hex(t) for t in texts]
    if own is not None and urls is meta[b"redirect_urls"] and None not in fps and texts == urls:
        meta[b"redirect_fingerprints"] = fps  # the usual case: the list as it is
        return
    kept = [(t, fp) for t, fp in zip(texts, fps) if fp is not None]
    if own is None or not kept:
        del meta[b"redirect_urls"]
        meta.pop(b"redirect_fingerprints", None)
        return
    meta[b"redirect_urls"] = [u for u, _ in kept]
    meta[b"redirect_fingerprints"] = [fp for _, fp in kept]


class FingerprintMiddleware(Middleware):
    """Sets ``meta[b"fingerprint"]`` (and ``b"redirect_fingerprints"``) of every request and response it sees."""

    component_name = "LinkRank Fingerprint Middleware"

    @classmethod
    def from_manager(cls, manager: Any) -> FingerprintMiddleware:
        return cls()

    def frontier_start(self) -> None:
        pass

    def frontier_stop(self) -> None:
        pass

    def _add(self, obj: _Obj) -> _Obj:
        fp = _hex(obj.url)
        meta = obj.meta
        if fp is None:
            meta.pop(b"fingerprint", None)
        else:
            meta[b"fingerprint"] = fp
        if b"redirect_urls" in meta:
            _redirects(meta, fp)
        return obj

    def add_seeds(self, seeds: list[Request]) -> list[Request]:
        for seed in seeds:
            self._add(seed)
        return seeds

    def page_crawled(self, response: Response) -> Response:
        return self._add(response)

    def links_extracted(self, request: Request, links: Iterable[Request]) -> Request:
        for link in links:
            self._add(link)
        return self._add(request)

    def request_error(self, request: Request, error: Any) -> Request:
        return self._add(request)
