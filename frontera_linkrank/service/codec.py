"""The messages between a frontier service and its spiders: msgpack maps
with a schema version, checked field by field where they enter (nothing
received is unpickled or executed, and no value of the wrong type or range
gets further than this module).

Every message is a map with ``"v"`` (schema) and ``"t"`` (its kind):

- a **feed entry** (``"f"``, frontier -> spider): one leased request,
  ``{"l": lease id, "f": fingerprint (40 hex bytes), "u": URL, "d": depth,
  "r": request parts or nil}``;
- a **report** (``"r"``, spider -> frontier, on the log): ``{"s": spider
  id, "i": [item, ...]}``, one item per finished request: fetched ``{"k":
  "f", "l", "f", "u": final URL, "s": status, "c": redirect chain, "rr":
  redirect statuses, "sc": score, "h": content hash, "hd": headers, "ln":
  [link, ...]}`` or failed ``{"k": "e", "l", "f", "u", "e": error, "p":
  permanent, "rt": retried by the spider already}``;
- **seeds** (``"s"``, spider -> frontier, on the log): ``{"i": [link, ...]}``;
- control records: a spider's heartbeat (``"h"``), the partition
  assignment (``"a"``), the frontier's state (``"x"``), the crawl's run
  (``"run"``) and the frontier lock (``"lock"``).

A link (or seed) is ``[URL, fingerprint, parts or nil]``; parts are
``{"m": method, "h": headers, "c": cookies, "b": body, "x": meta}`` for a
request that is not a plain GET.

With ``LINKRANK_SECRET`` every message is *sealed*: 16 bytes of
HMAC-SHA256 under a key derived from the secret and the crawl name follow
the msgpack bytes (:func:`seal`). A sealed message is accepted only by a
reader holding the same secret, for the same crawl and the same kind; an
unsealed or foreign one is refused like any malformed message.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
from dataclasses import dataclass
from typing import Any

import msgpack

from ..core.codec import FINGERPRINT_KEY, OutgoingRequest

logger = logging.getLogger(__name__)

SCHEMA = 1
"""Version of the message schema; a message of another version is refused."""

MAC_BYTES = 16
MAX_ID = (1 << 63) - 1  # lease ids, sequences: what a signed 64-bit field holds
MAX_URL = 1 << 16  # longer strings are not URLs (the frontier's own limit is lower)
MAX_TEXT = 1 << 20
HEX = b"0123456789abcdef"

_FRONTIER_META = frozenset((FINGERPRINT_KEY, b"depth"))


class CodecError(ValueError):
    """A message that is not a valid message of this schema (the text says why)."""


def pack(obj: Any) -> bytes:
    """msgpack bytes of ``obj`` (bytes stay bytes, str stays str)."""
    return msgpack.packb(obj, use_bin_type=True)


# -- sealing (LINKRANK_SECRET) -----------------------------------------------------------
def crawl_key(secret: str | bytes | None, crawl: str) -> bytes | None:
    """The key sealing the messages of ``crawl`` (None without a secret).

    >>> crawl_key(None, "c") is None, len(crawl_key("s", "c")), crawl_key("s", "c") != crawl_key("s", "d")
    (True, 32, True)
    """
    if not secret:
        return None
    raw = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    return hmac.new(raw, b"linkrank crawl " + crawl.encode("utf-8"), hashlib.sha256).digest()


def _mac(body: bytes, key: bytes, kind: str) -> bytes:
    return hmac.new(key, kind.encode("ascii") + b"\0" + body, hashlib.sha256).digest()[:MAC_BYTES]


def seal(body: bytes, key: bytes | None, kind: str) -> bytes:
    """``body`` followed by its MAC under ``key`` (``body`` itself without a key)."""
    return body if key is None else body + _mac(body, key, kind)


def unseal(raw: Any, key: bytes | None, kind: str) -> bytes:
    """The body of a sealed message; raises :class:`CodecError` if its MAC
    is not that of ``key`` (unsigned, or sealed with another secret or for
    another crawl or kind)."""
    if not isinstance(raw, bytes):
        raise CodecError("not a message (no bytes)")
    if key is None:
        return raw
    body, mac = raw[:-MAC_BYTES], raw[-MAC_BYTES:]
    if len(raw) <= MAC_BYTES or not hmac.compare_digest(mac, _mac(body, key, kind)):
        raise CodecError("unsigned, or signed with another LINKRANK_SECRET")
    return body


def unpack(raw: Any, kind: str | None = None, key: bytes | None = None) -> dict:
    """The map of a message; raises :class:`CodecError` naming the cause
    (a bad seal, not msgpack, not a map, another schema version, another kind)."""
    body = unseal(raw, key, kind or "")
    try:
        msg = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except msgpack.ExtraData:
        hint = ": signed with a LINKRANK_SECRET this reader does not have?" if key is None else ""
        raise CodecError(f"not one msgpack message (bytes after it{hint})") from None
    except Exception as e:  # noqa: BLE001 - msgpack raises several unrelated types (and UnicodeDecodeError)
        raise CodecError(f"not a msgpack message ({type(e).__name__})") from None
    if not isinstance(msg, dict):
        raise CodecError("not a map")
    if msg.get("v") != SCHEMA:
        raise CodecError(f"schema version {_short(msg.get('v'))}, expected {SCHEMA}")
    if kind is not None and msg.get("t") != kind:
        raise CodecError(f"message type {_short(msg.get('t'))}, expected {kind!r}")
    return msg


def record(kind: str, value: dict[str, Any], key: bytes | None = None) -> bytes:
    """A sealed control record of ``kind`` holding ``value``."""
    return seal(pack({"v": SCHEMA, "t": kind, **value}), key, kind)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- field checks ---------------------------------------------------------------------------
def is_int(value: Any, lo: int = 0, hi: int = MAX_ID) -> bool:
    """An ``int`` (not a bool) in ``lo..hi``."""
    return type(value) is int and lo <= value <= hi


def is_fingerprint(value: Any) -> bool:
    """40 lower-case hex digits as bytes."""
    return type(value) is bytes and len(value) == 40 and not value.translate(None, HEX)


def is_name(value: Any, max_len: int = 200) -> bool:
    """A spider id or crawl name: 1..``max_len`` letters, digits, ``._-``."""
    return (type(value) is str and 0 < len(value) <= max_len and value.isascii()
            and value.replace(".", "a").replace("_", "a").replace("-", "a").isalnum())


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _text_list(value: Any, max_n: int) -> bool:
    return type(value) is list and len(value) <= max_n and all(type(x) is str and len(x) <= MAX_URL for x in value)


def _headers(value: Any) -> bool:
    return type(value) is dict and all(
        type(k) is bytes and type(v) is list and all(type(x) is bytes for x in v) for k, v in value.items())


# -- requests ---------------------------------------------------------------------------
def request_parts(req: Any) -> dict | None:
    """Wire parts of a request (Frontera's or :class:`OutgoingRequest`), or
    None for a plain GET. Meta values msgpack cannot carry are dropped
    (with a warning): only plain data crosses the broker. Raises
    :class:`CodecError` for parts that could not make a request."""
    from ..core.codec import malformed_parts

    meta = req.meta
    if not isinstance(meta, dict):
        raise CodecError("request meta is not a map")
    meta = {k: v for k, v in meta.items() if k not in _FRONTIER_META}
    if meta.get(b"scrapy_meta") == {}:
        del meta[b"scrapy_meta"]
    method = req.method or b"GET"
    if method == b"GET" and not req.headers and not req.cookies and not req.body and not meta:
        return None
    bad = malformed_parts((method, req.headers or None, req.cookies or None, meta, req.body or b""))
    if bad:
        raise CodecError(f"request {', '.join(bad)} malformed")
    parts = {"m": method, "h": dict(req.headers or {}), "c": req.cookies or {}, "b": req.body or b"", "x": meta}
    if not packable(parts):
        parts["x"] = _plain_meta(meta, req.url)
        for name in ("h", "c", "b"):
            if not packable(parts[name]):
                logger.warning("%s: request %s cannot cross the broker and are dropped", req.url, name)
                parts[name] = {} if name != "b" else b""
    return parts


def packable(value: Any) -> bool:
    """True if msgpack can carry ``value`` (no objects, only plain data)."""
    try:
        pack(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _plain_meta(meta: dict, url: str) -> dict:
    out = {}
    for k, v in meta.items():
        if isinstance(v, dict):
            kept = {kk: vv for kk, vv in v.items() if packable({kk: vv})}
            if len(kept) < len(v):
                logger.warning("%s: meta %s cannot cross the broker and are dropped", url,
                               sorted(str(kk) for kk in v if kk not in kept))
            v = kept
        elif not packable(v):
            logger.warning("%s: meta %r cannot cross the broker and is dropped", url, k)
            continue
        out[k] = v
    return out


def link(req: Any, fp_hex: bytes) -> list:
    """The wire form of a link or seed: ``[url, fingerprint, parts]``."""
    return [req.url, fp_hex, request_parts(req)]


class PlainLink:
    """A plain GET link as the frontier core reads it (cheaper than a full request: one per link)."""

    __slots__ = ("url", "meta")
    method = b"GET"
    headers: dict = {}
    cookies: dict = {}
    body = b""

    def __init__(self, url: str, meta: dict) -> None:
        self.url = url
        self.meta = meta


def check_parts(parts: Any) -> dict:
    """Wire parts of a request, checked: only the keys ``m h c b x``, each
    of a type a request can be built from (raises :class:`CodecError`)."""
    from ..core.codec import malformed_parts

    if type(parts) is not dict or not set(parts) <= {"m", "h", "c", "b", "x"}:
        raise CodecError("a link's parts are not a map of m, h, c, b, x")
    meta = parts.get("x")
    meta = {} if meta is None else meta
    method = parts.get("m") or b"GET"
    bad = malformed_parts((method, parts.get("h") or None, parts.get("c") or None, meta, parts.get("b") or b""))
    if not bad and type(meta.get(b"scrapy_meta") or {}) is not dict:
        bad = ["meta"]
    if bad:
        raise CodecError(f"a link's {', '.join(bad)} malformed")
    return parts


def to_request(item: Any, factory: Any = OutgoingRequest) -> Any:
    """A request (made by ``factory``; a :class:`PlainLink` for a plain
    GET) from the wire form of a link; raises :class:`CodecError` if it is
    malformed."""
    if type(item) is not list or len(item) != 3:
        raise CodecError("a link is not [url, fingerprint, parts]")
    url, fp, parts = item
    if type(url) is not str or not 0 < len(url) <= MAX_URL:
        raise CodecError("a link's URL is not text")
    if not is_fingerprint(fp):
        raise CodecError("a link's fingerprint is not 40 hex digits")
    if parts is None:
        return PlainLink(url, {FINGERPRINT_KEY: fp})
    check_parts(parts)
    meta = dict(parts.get("x") or {})
    meta.setdefault(b"scrapy_meta", {})
    meta[FINGERPRINT_KEY] = fp
    return factory(url=url, method=parts.get("m") or b"GET", headers=parts.get("h") or {},
                   cookies=parts.get("c") or {}, meta=meta, body=parts.get("b") or b"")


# -- feed entries -------------------------------------------------------------------------
@dataclass
class FeedEntry:
    """A leased request as a spider receives it."""

    lease: int
    fp: bytes
    url: str
    depth: int
    parts: dict | None


def feed_entry(lease: int, req: Any, key: bytes | None = None) -> bytes:
    """The feed entry of a request the frontier leased (``req`` from
    :meth:`FrontierCore.next_requests`); raises :class:`CodecError` if its
    parts cannot make a request."""
    meta = req.meta
    body = pack({"v": SCHEMA, "t": "f", "l": lease, "f": meta[FINGERPRINT_KEY], "u": req.url,
                 "d": int(meta.get(b"depth", 0)), "r": request_parts(req)})
    return seal(body, key, "f")


def read_feed_entry(raw: Any, key: bytes | None = None) -> FeedEntry:
    """The :class:`FeedEntry` of a feed message (raises :class:`CodecError`)."""
    msg = unpack(raw, "f", key)
    lease, fp, url, depth, parts = msg.get("l"), msg.get("f"), msg.get("u"), msg.get("d", 0), msg.get("r")
    if not is_int(lease, 1) or not is_fingerprint(fp) or type(url) is not str or not url:
        raise CodecError("feed entry without lease, fingerprint or URL")
    if not is_int(depth, 0, 1 << 31) or not (parts is None or type(parts) is dict):
        raise CodecError("feed entry with a malformed depth or parts")
    if parts is not None:
        check_parts(parts)
    return FeedEntry(lease, fp, url, depth, parts)


# -- log messages ----------------------------------------------------------------------------
def report(spider: str, items: list[dict], key: bytes | None = None) -> bytes:
    """A log message with the outcomes ``items`` of ``spider``'s requests."""
    return seal(pack({"v": SCHEMA, "t": "r", "s": spider, "i": items}), key, "log")


def seeds(links: list[list], key: bytes | None = None) -> bytes:
    """A log message adding seeds (wire links)."""
    return seal(pack({"v": SCHEMA, "t": "s", "i": links}), key, "log")


def read_log(raw: Any, key: bytes | None = None) -> dict:
    """A log message (report or seeds), checked down to its item list."""
    msg = unpack(unseal(raw, key, "log"), None, None) if key is not None else unpack(raw)
    if msg.get("t") not in ("r", "s") or type(msg.get("i")) is not list:
        raise CodecError(f"log message of unknown type {_short(msg.get('t'))} or without items")
    if msg["t"] == "r" and not is_name(msg.get("s")):
        raise CodecError("report without a valid spider id")
    return msg


def check_item(item: Any) -> dict:
    """A report item, checked field by field (raises :class:`CodecError`
    naming the field); optional fields absent or nil are left out."""
    if type(item) is not dict or item.get("k") not in ("f", "e"):
        raise CodecError("report item of unknown kind")
    if not is_int(item.get("l"), 1) or not is_fingerprint(item.get("f")):
        raise CodecError("report item without lease or fingerprint")
    url = item.get("u")
    if type(url) is not str or len(url) > MAX_URL:
        raise CodecError("report item without URL")
    out = {"k": item["k"], "l": item["l"], "f": item["f"], "u": url}
    if item["k"] == "e":
        for name, ok in (("e", lambda v: type(v) is str and len(v) <= MAX_TEXT),
                         ("p", lambda v: type(v) is bool), ("rt", lambda v: type(v) is bool)):
            _optional(item, out, name, ok)
        return out
    if not is_int(item.get("s"), -(1 << 31), 1 << 31):
        raise CodecError("fetched report without status")
    out["s"] = item["s"]
    for name, ok in (("c", lambda v: _text_list(v, 100)),
                     ("rr", lambda v: type(v) is list and len(v) <= 100 and all(is_int(x, 0, 999) for x in v)),
                     ("sc", _number), ("h", lambda v: is_int(v, 0, (1 << 64) - 1)), ("hd", _headers),
                     ("ln", lambda v: type(v) is list)):
        _optional(item, out, name, ok)
    return out


def _optional(item: dict, out: dict, name: str, ok: Any) -> None:
    value = item.get(name)
    if value is None:
        return
    if not ok(value):
        raise CodecError(f"report item field {name!r} malformed ({type(value).__name__})")
    out[name] = value
