"""Change detection: a hash of a page's normalised content.

Pages carry things that change on every fetch without the page changing:
a "generated at" time, a session id in every link, a CSRF token, an ad
slot. Hashing the raw bytes would report each fetch as a change and ruin
the change-rate estimates, so HTML is normalised first:

- comments, ``<script>``, ``<style>``, ``<noscript>`` and ``<template>``
  elements are dropped, and so are all other tags and their attributes,
  except link targets (``href``/``src``), which are kept with common
  session/tracking query parameters removed (``sid``, ``sessionid``,
  ``jsessionid``, ``phpsessid``, ``token``, ``utm_*``...) and
  ``;jsessionid=`` path parameters cut;
- in the remaining text, dates and times (``2024-05-01``, ``01/05/2024``,
  ``12:34:56``, ``1 May 2024``), long digit runs (Unix timestamps, counters
  of 9+ digits) and long hex/base64-like tokens (16+ characters) are
  replaced by a placeholder;
- entities are decoded and whitespace is collapsed.

Non-HTML content is hashed as is (text with whitespace collapsed). The
hash is the first 8 bytes of BLAKE2b, as an unsigned integer (0 is never
returned, so 0 can mean "no content").

>>> a = content_hash(b"<p>Hello</p><!-- built 12:00:01 --><a href='/x?sid=123'>x</a>")
>>> b = content_hash(b"<p>Hello</p><!-- built 12:07:33 --><a href='/x?sid=999'>x</a>")
>>> c = content_hash(b"<p>Hello world</p><a href='/x'>x</a>")
>>> a == b, a == c
(True, False)
"""

from __future__ import annotations

import hashlib
import html
import re

_DROP = re.compile(
    rb"<!--.*?-->|<(script|style|noscript|template)\b[^>]*>.*?</\1\s*>",
    re.IGNORECASE | re.DOTALL,
)
_LINK = re.compile(rb"""\b(?:href|src)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)
_TAG = re.compile(rb"<[^>]*>")
_SESSION_PARAM = re.compile(
    r"(?:^|&)(?:sid|sess|session|sessionid|session_id|jsessionid|phpsessid|aspsessionid\w*|"
    r"token|csrf\w*|utm_\w+|fbclid|gclid|_ga|cachebust\w*|nocache|_)=[^&#]*",
    re.IGNORECASE,
)
_PATH_SESSION = re.compile(r";jsessionid=[^?#]*", re.IGNORECASE)
_VOLATILE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"  # ISO
    r"|\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b"  # 01/05/2024
    r"|\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp][Mm])?\b"  # times
    r"|\b\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{4}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2},?\s+\d{4}\b"
    r"|\b\d{9,}\b"  # timestamps, counters
    r"|\b(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+/_-]{16,}={0,2}",  # tokens
    re.IGNORECASE,
)
_SPACE = re.compile(r"\s+")
_BSPACE = re.compile(rb"\s+")


def _clean_link(raw: str) -> str:
    url = _PATH_SESSION.sub("", raw)
    base, q, query = url.partition("?")
    if q:
        query, hashmark, frag = query.partition("#")
        query = _SESSION_PARAM.sub("", query).lstrip("&")
        url = base + ("?" + query if query else "") + (hashmark + frag)
    return url


def normalise_html(body: bytes | str) -> str:
    """The parts of an HTML page that count for change detection (str)."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogateescape")
    body = _DROP.sub(b" ", body)
    links = [
        _clean_link(html.unescape((m.group(1) or m.group(2) or m.group(3)).decode("utf-8", "replace")))
        for m in _LINK.finditer(body)
    ]
    text = html.unescape(_TAG.sub(b" ", body).decode("utf-8", "replace"))
    text = _VOLATILE.sub("#", text)
    return _SPACE.sub(" ", text).strip() + "\n" + "\n".join(links)


def content_hash(body: bytes | str, content_type: str | None = None) -> int:
    """64-bit hash of ``body`` after normalisation (HTML unless
    ``content_type`` says otherwise); never 0."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogateescape")
    ctype = (content_type or "text/html").lower()
    if "html" in ctype or "xml" in ctype:
        data = normalise_html(body).encode("utf-8", "surrogateescape")
    elif ctype.startswith("text/") or "json" in ctype:
        data = _BSPACE.sub(b" ", body).strip()
    else:
        data = body
    h = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
    return h or 1
