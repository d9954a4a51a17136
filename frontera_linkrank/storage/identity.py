"""The key of a request: which requests are the same page.

A page database stores one page per key (20 bytes). Two schemes exist,
and the metadata section ``"keys"`` of a database says which one it uses
(:func:`key_scheme`):

``"url"`` (:data:`URL_KEYS`)
    Every request is keyed by its URL alone: ``sha1(canonicalize_url(url))``,
    Frontera's URL fingerprint. A database without a ``"keys"`` section
    uses it (the Frontera backend writes such databases).

``"request"`` (:data:`REQUEST_KEYS`)
    A request is keyed by its method, canonical URL and body, the identity
    of Scrapy's default ``REQUEST_FINGERPRINTER``: two requests have the
    same key exactly when Scrapy's default fingerprints of them are equal.
    A GET with no body has the key of the ``"url"`` scheme, so a database
    of the ``"url"`` scheme whose pages are plain GETs is valid under both
    (the Scrapy scheduler moves such a database to ``"request"`` when it
    opens it). Any other request is keyed by
    ``sha1(METHOD + " " + canonical URL + "\\n" + body)``; a canonical URL
    starts with its scheme, so neither form can produce the other's input.
    With ``meta["verbatim_url"]`` (Scrapy's switch to fingerprint the URL as
    it is) the URL is not canonicalised and the request is keyed as a
    non-GET one.

:func:`request_key` is the one definition; the Scrapy scheduler, the
frontier service and the tools that look pages up by URL or check a
database all call it. :func:`stored_request_key` recomputes the key of a
page from its URL and its stored request parts, to verify it.

>>> request_key("http://a.test/?b=2&a=1") == request_key("http://a.test/?a=1&b=2")
True
>>> request_key("http://a.test/x") == request_key("http://a.test/x", "post", b"q=1")
False
>>> request_key("http://a.test/x", "POST", b"q=1") == request_key("http://a.test/x", b"POST", b"q=2")
False
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from w3lib.url import canonicalize_url

from .urls import RejectedURL, fingerprint

URL_KEYS = "url"
REQUEST_KEYS = "request"
SCHEMES = (URL_KEYS, REQUEST_KEYS)
SECTION = "keys"  # metadata section: {"scheme": "url" | "request"}


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("ascii", "replace")
    return str(value)


def request_key(url: str | bytes, method: str | bytes = "GET", body: bytes | str | None = b"",
                verbatim: bool = False) -> bytes:
    """The 20-byte key of a request under the ``"request"`` scheme.

    Raises
    ------
    RejectedURL
        ``url`` cannot be canonicalised (see :func:`.urls.fingerprint`).
    """
    method = _text(method).upper()
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogateescape")
    body = bytes(body or b"")
    if method == "GET" and not body and not verbatim:
        return fingerprint(url)
    if not isinstance(url, (str, bytes)):
        raise RejectedURL("malformed", repr(url))
    try:
        text = _text(url) if verbatim else canonicalize_url(url)
        head = f"{method} {text}\n".encode("utf-8", "surrogateescape")
    except (ValueError, UnicodeError) as e:
        raise RejectedURL("invalid_utf8" if isinstance(e, UnicodeError) else "malformed", str(url)) from None
    return hashlib.sha1(head + body).digest()


def key_for(scheme: str, url: str | bytes, method: str | bytes = "GET", body: bytes | str | None = b"",
            verbatim: bool = False) -> bytes:
    """The key of a request in a database of ``scheme``."""
    if scheme == URL_KEYS:
        return fingerprint(url)
    return request_key(url, method, body, verbatim)


def stored_request_key(scheme: str, url: str, parts: tuple | None) -> bytes:
    """The key of a page from its URL and stored request parts
    (``(method, headers, cookies, meta, body)`` as the page database keeps
    them, None for a plain GET), to check a stored key against."""
    if parts is None:
        return key_for(scheme, url)
    method, _headers, _cookies, meta, body = parts
    scrapy_meta = meta.get(b"scrapy_meta") if isinstance(meta, Mapping) else None
    verbatim = bool(isinstance(scrapy_meta, Mapping) and scrapy_meta.get("verbatim_url"))
    return key_for(scheme, url, method or b"GET", body, verbatim)


def key_scheme(section: Any) -> str:
    """The scheme recorded in a database's ``"keys"`` metadata section
    (``db.meta_section("keys")``); ``"url"`` when there is none.

    >>> key_scheme(None), key_scheme({"scheme": "request"})
    ('url', 'request')
    """
    if isinstance(section, Mapping) and section.get("scheme") in SCHEMES:
        return str(section["scheme"])
    return URL_KEYS


__all__ = ["REQUEST_KEYS", "SCHEMES", "SECTION", "URL_KEYS", "key_for", "key_scheme", "request_key",
           "stored_request_key"]
