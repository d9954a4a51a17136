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

The work is bounded: of an HTML page only the first
:data:`MAX_CONTENT_BYTES` are read, and of what is left once comments,
scripts and styles are dropped, the first :data:`MAX_MARKUP_BYTES`; every
step takes time linear in them (no pattern scans the rest of the page
again from each of many starting points). Whatever a page holds, it costs
a few milliseconds on the thread that reads it (a change beyond the limits
is not seen). An unclosed comment or ``<script>`` runs to the end of the
page, as in a browser.

Text and JSON are hashed with whitespace collapsed (their first
:data:`MAX_CONTENT_BYTES`), other content as is, whole. The hash is the
first 8 bytes of BLAKE2b, as an unsigned integer (0 is never returned, so
0 can mean "no content").

>>> a = content_hash(b"<p>Hello</p><!-- built 12:00:01 --><a href='/x?sid=123'>x</a>")
>>> b = content_hash(b"<p>Hello</p><!-- built 12:07:33 --><a href='/x?sid=999'>x</a>")
>>> c = content_hash(b"<p>Hello world</p><a href='/x'>x</a>")
>>> a == b, a == c
(True, False)
"""

from __future__ import annotations

import hashlib
import re

from .entities import CHARREF_NO_NUL, unescape

MAX_CONTENT_BYTES = 256 * 1024
"""Bytes of an HTML or text body that change detection reads."""
MAX_MARKUP_BYTES = 32 * 1024
"""Of an HTML page, the bytes kept once comments, scripts and styles are
dropped: the tags, links and text that are normalised and hashed. (With
the first limit, it bounds the time a page costs: about 10 ms at worst.)"""

# Every pattern below is written so that Python's regular expression engine
# can skip quickly to where a match may start (each starts with a literal or
# a character class, none is case-insensitive as a whole), and no scan is
# repeated from many starting points: an element that is not closed runs
# to the end, so each match ends where its scan stopped.
_DROP = re.compile(
    rb"<(?=[!SsTtNn])(?:!--(?:.*?-->|.*)"
    rb"|(script|style|noscript|template)\b[^>]*(?:>.*?</\1\s*>|.*))",
    re.IGNORECASE | re.DOTALL,
)
# "href" or "src" at a word boundary, in any case.
_LINK = re.compile(
    rb"[HhSs](?<![A-Za-z0-9_].)(?:(?<=[Hh])[Rr][Ee][Ff]|(?<=[Ss])[Rr][Cc])"
    rb"""\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))"""
)
_TAG = re.compile(rb"<[^>]*>")

# Links are cleaned all together, each after a NUL (so a link's own NUL,
# \x01, \x02 and \x03 become DEL). In a link's query, its first '?' becomes
# \x01 followed by \x03, its '&' become \x03, and \x02 marks its end
# (before a '#' or the link's end): a session parameter is then \x03 and
# its name, and only ever inside a query.
_LINK_CONTROL = bytes.maketrans(b"\x00\x01\x02\x03", b"\x7f\x7f\x7f\x7f")
_PATH_SESSION = re.compile(r";jsessionid=[^?#\x00]*", re.IGNORECASE)
_QUERY = re.compile(r"\x00([^?\x00]*)\?([^#\x00]*)")
_SESSION_PARAM = re.compile(
    r"\x03(?:sid|sess|session|sessionid|session_id|jsessionid|phpsessid|aspsessionid\w*|"
    r"token|csrf\w*|utm_\w+|fbclid|gclid|_ga|cachebust\w*|nocache|_)=[^\x03\x02]*",
    re.IGNORECASE,
)
_QUERY_START = re.compile(r"\x01\x03+")

# Volatile text: dates, times, long numbers and tokens, found in one pass
# in the same order as a search of the alternatives at every word boundary
# would find them. Each match starts with the character before the word
# boundary (a character class the engine skips to quickly); that character
# is put back. The letters a case-insensitive [a-z] matches are spelt out.
_LETTERS = "A-Za-z\u0130\u0131\u017f\u212a"
_WORD = _LETTERS + "0-9_"  # word characters that can be part of a token
_TOKEN_CHARS = _WORD + "+/-"
_MONTH = (
    r"(?:[Jj](?:[Aa][Nn]|[Uu][NnLl])|[Ff][Ee][Bb]|[Mm][Aa][RrYy]|[Aa](?:[Pp][Rr]|[Uu][Gg])"
    r"|[Ss\u017f][Ee][Pp]|[Oo][Cc][Tt]|[Nn][Oo][Vv]|[Dd][Ee][Cc])"
)
_DATE = (
    r"(?:\d(?:"
    r"\d{3}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:[Zz]|[+-]\d{2}:?\d{2})?)?\b"  # ISO
    r"|\d?[/.]\d{1,2}[/.]\d{2,4}\b"  # 01/05/2024
    r"|\d?:\d{2}(?::\d{2})?(?:\s?[AaPp][Mm])?\b"  # times
    rf"|\d?\s+{_MONTH}[{_LETTERS}]*\.?\s+\d{{4}}\b"  # 1 May 2024
    r"|\d{8,}\b)"  # timestamps, counters
    rf"|{_MONTH}[{_LETTERS}]*\.?\s+\d{{1,2}},?\s+\d{{4}}\b)"  # May 1, 2024
)
# A token: 16+ token characters with a digit and a letter.
_TOKEN = (
    rf"(?=[{_TOKEN_CHARS}]{{16}})(?=[{_TOKEN_CHARS}]*?\d)(?=[{_TOKEN_CHARS}]*?[{_LETTERS}])"
    rf"[{_TOKEN_CHARS}]+"
)
# A token starts at the first word boundary of a run of token characters
# (a token can only be found there, which keeps each run to one scan, not
# one from every '/' of "a/a/a/..."): after the run's leading +/- signs, or
# at the first +/- sign when a letter such as "é" is glued before the run;
# or right after a date that ends inside a run.
_VOLATILE = re.compile(
    rf"(?P<pre>[^{_WORD}])(?=[\d{_TOKEN_CHARS}])(?:"
    rf"(?=[\dJjFfMmAaSsOoNnDd\u017f])(?<=\W)(?P<date>{_DATE})(?:(?=[+/-])(?P<tail>{_TOKEN}))?"
    # no token starts after a +/- sign: it is inside a run
    rf"|(?<![+/-])(?:(?=[+/-])(?<=\w){_TOKEN}"
    rf"|(?=[+/-]*\b[{_TOKEN_CHARS}]{{16}})(?P<lead>[+/-]*+)\b(?!{_DATE}){_TOKEN}"
    rf"|(?=[{_WORD}]+[+/-])(?<=\w)(?P<glued>[{_WORD}]++){_TOKEN}))"
)
# A token is replaced by _MARK (a lone surrogate, which no decoded text
# holds), and up to two '=' after it go with it afterwards: left in place
# meanwhile, an '=' can be the character before the next match.
_MARK = "\udfff"
_TOKEN_END = re.compile(_MARK + "={0,2}")


def _volatile(m: re.Match[str]) -> str:
    if m["date"] is not None:
        return m["pre"] + ("#" if m["tail"] is None else "#" + _MARK)
    return m["pre"] + (m["lead"] or m["glued"] or "") + _MARK


def _mark_query(m: re.Match[str]) -> str:
    # A function, not a template: Python expands templates in Python code.
    return "\x00" + m[1] + "\x01\x03" + m[2].replace("&", "\x03") + "\x02"


def _links(markup: bytes) -> str:
    """The page's link targets, cleaned, one a line."""
    found = _LINK.findall(markup.translate(_LINK_CONTROL))
    if not found:
        return ""
    # Of the three groups, one holds the value and the others are empty.
    joined = (b"\x00" + b"\x00".join(map(b"".join, found))).decode("utf-8", "replace")
    joined = _PATH_SESSION.sub("", unescape(joined, CHARREF_NO_NUL))
    joined = _QUERY.sub(_mark_query, joined)
    # The '&' a query starts with go too, and a query left empty loses its '?'.
    joined = _QUERY_START.sub("\x01", _SESSION_PARAM.sub("", joined))
    joined = joined.replace("\x01\x02", "").replace("\x01", "?").replace("\x02", "").replace("\x03", "&")
    return joined[1:].replace("\x00", "\n")


def normalise_html(body: bytes | str) -> str:
    """The parts of an HTML page that count for change detection (str):
    its text, a line break, its cleaned links one a line."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogateescape")
    markup = _DROP.sub(b" ", body[:MAX_CONTENT_BYTES])[:MAX_MARKUP_BYTES]
    links = _links(markup)
    # No tag is closed after the last '>': what follows it stays as text.
    end = markup.rfind(b">") + 1
    text = unescape((_TAG.sub(b" ", markup[:end]) + markup[end:]).decode("utf-8", "replace"))
    # The leading space puts something before the first character (white
    # space is collapsed at the end anyway).
    text = _TOKEN_END.sub("#", _VOLATILE.sub(_volatile, " " + text))
    return " ".join(text.split()) + "\n" + links


def content_hash(body: bytes | str, content_type: str | None = None) -> int:
    """64-bit hash of ``body`` after normalisation (HTML unless
    ``content_type`` says otherwise); never 0. Of HTML and text, reads at
    most :data:`MAX_CONTENT_BYTES`; other content is hashed whole."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogateescape")
    ctype = (content_type or "text/html").lower()
    if "html" in ctype or "xml" in ctype:
        data = normalise_html(body).encode("utf-8", "surrogateescape")
    elif ctype.startswith("text/") or "json" in ctype:
        data = b" ".join(body[:MAX_CONTENT_BYTES].split())
    else:
        data = body
    h = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
    return h or 1
