"""The messages between a frontier service and its spiders: msgpack maps
with a schema version, nothing else (nothing received is unpickled or
executed).

Three kinds of message travel:

- a **feed entry** (frontier -> spider): one leased request, ``{"v", "l":
  lease id, "f": fingerprint (40 hex bytes), "u": URL, "d": depth, "r":
  request parts or nil}``;
- a **report** (spider -> frontier, on the log): ``{"v", "t": "r", "s":
  spider id, "i": [item, ...]}``, one item per finished request: fetched
  ``{"k": "f", "l", "f", "u": final URL, "s": status, "c": redirect chain,
  "rr": redirect statuses, "sc": score, "h": content hash, "hd": headers,
  "ln": [link, ...]}`` or failed ``{"k": "e", "l", "f", "u", "e": error,
  "p": permanent, "rt": retried by the spider already}``;
- **seeds** (spider -> frontier, on the log): ``{"v", "t": "s", "i":
  [link, ...]}``.

A link (or seed) is ``[URL, fingerprint, parts or nil]``; parts are
``{"m": method, "h": headers, "c": cookies, "b": body, "x": meta}`` for a
request that is not a plain GET. Fingerprints, hosts and content hashes
are computed by the spiders: that per-link work is the part that scales.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from typing import Any

import msgpack

from ..core.codec import FINGERPRINT_KEY, INTERNAL_META, OutgoingRequest

logger = logging.getLogger(__name__)

SCHEMA = 1
"""Version of the message schema; a message of another version is refused."""

_FRONTIER_META = frozenset((FINGERPRINT_KEY, b"depth"))


class CodecError(ValueError):
    """A message that is not a valid message of this schema."""


def pack(obj: Any) -> bytes:
    """msgpack bytes of ``obj`` (bytes stay bytes, str stays str)."""
    return msgpack.packb(obj, use_bin_type=True)


def unpack(raw: bytes, kind: str | None = None) -> dict:
    """The map of a message; raises :class:`CodecError` naming the cause
    (not msgpack, not a map, another schema version, another kind)."""
    try:
        msg = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise CodecError(f"not a msgpack message ({type(e).__name__})") from None
    if not isinstance(msg, dict):
        raise CodecError("not a map")
    if msg.get("v") != SCHEMA:
        raise CodecError(f"schema version {msg.get('v')!r}, expected {SCHEMA}")
    if kind is not None and msg.get("t") != kind:
        raise CodecError(f"message type {msg.get('t')!r}, expected {kind!r}")
    return msg


def packable(value: Any) -> bool:
    """True if msgpack can carry ``value`` (no objects, only plain data)."""
    try:
        pack(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


# -- requests ---------------------------------------------------------------------------
def request_parts(req: Any) -> dict | None:
    """Wire parts of a request (Frontera's or :class:`OutgoingRequest`), or
    None for a plain GET. Meta values msgpack cannot carry are dropped
    (with a warning): only plain data crosses the broker."""
    meta = {k: v for k, v in req.meta.items() if k not in _FRONTIER_META}
    if meta.get(b"scrapy_meta") == {}:
        del meta[b"scrapy_meta"]
    method = req.method or b"GET"
    if method == b"GET" and not req.headers and not req.cookies and not req.body and not meta:
        return None
    parts = {"m": method, "h": dict(req.headers or {}), "c": req.cookies or {}, "b": req.body or b"", "x": meta}
    if not packable(parts):
        parts["x"] = _plain_meta(meta, req.url)
        for key in ("h", "c", "b"):
            if not packable(parts[key]):
                logger.warning("%s: request %s cannot cross the broker and are dropped", req.url, key)
                parts[key] = {} if key != "b" else b""
    return parts


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


def link(req: Any, fp_hex: bytes, key: bytes | None = None) -> list:
    """The wire form of a link or seed: ``[url, fingerprint, parts]``
    (parts signed with ``key`` if given)."""
    parts = request_parts(req)
    return [req.url, fp_hex, parts if key is None else sign(req.url, parts, key)]


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


def to_request(item: Any, factory: Any = OutgoingRequest) -> Any:
    """A request (made by ``factory``; a :class:`PlainLink` for a plain
    GET) from the wire form of a link; raises :class:`CodecError` if it is
    malformed."""
    if type(item) is not list or len(item) != 3:
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise CodecError("a link is not [url, fingerprint, parts]")
    url, fp, parts = item
    if type(url) is not str or type(fp) is not bytes or len(fp) != 40:
        raise CodecError("a link's URL or fingerprint is malformed")
    if parts is None:
        return PlainLink(url, {FINGERPRINT_KEY: fp})
    if not isinstance(parts, dict) or not isinstance(parts.get("x", {}), dict):
        raise CodecError("a link's parts are malformed")
    meta = dict(parts.get("x") or {})
    meta.setdefault(b"scrapy_meta", {})
    meta[FINGERPRINT_KEY] = fp
    method = parts.get("m") or b"GET"
    if not isinstance(method, bytes):
        raise CodecError("a link's method is malformed")
    return factory(url=url, method=method, headers=parts.get("h") or {}, cookies=parts.get("c") or {},
                   meta=meta, body=parts.get("b") or b"")


# -- signatures ---------------------------------------------------------------------------
SIGNATURE_KEY = b"linkrank_sig"  # meta key of a request's signature (LINKRANK_SECRET)


def _canonical(obj: Any) -> Any:
    """``obj`` with dicts as key-sorted pairs and tuples as lists (stable under storage round trips)."""
    if isinstance(obj, dict):
        return sorted(([_canonical(k), _canonical(v)] for k, v in obj.items()), key=repr)
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    return obj


def signature(url: str, parts: dict, key: bytes) -> bytes:
    """HMAC-SHA256 (16 bytes) of a request's URL and the parts the frontier
    stores and hands back (method, headers, cookies, body, meta less the
    frontier's own keys)."""
    meta = {k: v for k, v in (parts.get("x") or {}).items()
            if k not in INTERNAL_META and k != SIGNATURE_KEY and not (k == b"scrapy_meta" and not v)}
    doc = [url, parts.get("m") or b"GET", parts.get("h") or {}, parts.get("c") or {}, parts.get("b") or b"", meta]
    return hmac.new(key, pack(_canonical(doc)), hashlib.sha256).digest()[:16]


def sign(url: str, parts: dict | None, key: bytes) -> dict | None:
    """``parts`` with their signature in the meta (None stays None: a plain GET carries nothing to forge)."""
    if parts is not None:
        parts.setdefault("x", {})[SIGNATURE_KEY] = signature(url, parts, key)
    return parts


def verified(url: str, parts: dict | None, key: bytes) -> bool:
    """True if ``parts`` (None included) carry a valid signature under ``key``."""
    if parts is None:
        return True
    sig = (parts.get("x") or {}).get(SIGNATURE_KEY)
    return isinstance(sig, bytes) and hmac.compare_digest(sig, signature(url, parts, key))


# -- feed entries -------------------------------------------------------------------------
@dataclass
class FeedEntry:
    """A leased request as a spider receives it."""

    lease: int
    fp: bytes
    url: str
    depth: int
    parts: dict | None


def feed_entry(lease: int, req: Any) -> bytes:
    """The feed entry of a request the frontier leased (``req`` from :meth:`FrontierCore.next_requests`)."""
    meta = req.meta
    return pack({"v": SCHEMA, "l": lease, "f": meta[FINGERPRINT_KEY], "u": req.url, "d": int(meta.get(b"depth", 0)),
                 "r": request_parts(req)})


def read_feed_entry(raw: bytes) -> FeedEntry:
    """The :class:`FeedEntry` of a feed message (raises :class:`CodecError`)."""
    msg = unpack(raw)
    lease, fp, url, depth, parts = msg.get("l"), msg.get("f"), msg.get("u"), msg.get("d", 0), msg.get("r")
    if not isinstance(lease, int) or not isinstance(fp, bytes) or not isinstance(url, str):
        raise CodecError("feed entry without lease, fingerprint or URL")
    if not isinstance(depth, int) or not (parts is None or isinstance(parts, dict)):
        raise CodecError("feed entry with a malformed depth or parts")
    return FeedEntry(lease, fp, url, depth, parts)


# -- log messages ----------------------------------------------------------------------------
def report(spider: str, items: list[dict]) -> bytes:
    """A log message with the outcomes ``items`` of ``spider``'s requests."""
    return pack({"v": SCHEMA, "t": "r", "s": spider, "i": items})


def seeds(links: list[list]) -> bytes:
    """A log message adding seeds (wire links)."""
    return pack({"v": SCHEMA, "t": "s", "i": links})


def read_log(raw: bytes) -> dict:
    """A log message (report or seeds), checked down to its item list."""
    msg = unpack(raw)
    if msg.get("t") not in ("r", "s") or not isinstance(msg.get("i"), list):
        raise CodecError(f"log message of unknown type {msg.get('t')!r} or without items")
    return msg


def check_item(item: Any) -> dict:
    """A report item, checked (raises :class:`CodecError`)."""
    if not isinstance(item, dict) or item.get("k") not in ("f", "e"):
        raise CodecError("report item of unknown kind")
    if not isinstance(item.get("l"), int) or not isinstance(item.get("f"), bytes) or len(item["f"]) != 40:
        raise CodecError("report item without lease or fingerprint")
    if not isinstance(item.get("u"), str):
        raise CodecError("report item without URL")
    if item["k"] == "f" and not isinstance(item.get("s"), int):
        raise CodecError("fetched report without status")
    return item
