"""A URL fingerprint middleware that never raises.

Frontera's ``UrlFingerprintMiddleware`` computes ``sha1(canonicalize_url(url))``
but raises on URLs ``canonicalize_url`` cannot handle (a lone surrogate
from invalid UTF-8, ``http://[bad``, a port out of range), and the exception
reaches the crawler. This one computes the same fingerprint and, when it
cannot, leaves ``meta[b'fingerprint']`` unset: the backend then rejects the
URL with a reason, logs and counts it, and goes on with the rest.

    MIDDLEWARES = ["frontera_linkrank.backend.middleware.FingerprintMiddleware"]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from frontera.core.components import Middleware

from ..storage.urls import RejectedURL, fingerprint

if TYPE_CHECKING:
    from frontera.core.models import Request, Response

_Obj = TypeVar("_Obj", "Request", "Response")  # _add returns what it was given


def _hex(url: str) -> bytes | None:
    try:
        return fingerprint(url).hex().encode("ascii")
    except RejectedURL:
        return None


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
            # Frontera's canonical solver reads these.
            meta[b"redirect_fingerprints"] = [_hex(u) for u in meta[b"redirect_urls"]]
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
