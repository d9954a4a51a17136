"""What a caller hands the core, checked before it touches any state.

A crawler reports responses, links, errors and seeds as objects it built
itself; any field may hold something the page database cannot store (a
status of 70000, a score of ``10**400``, a URL that is not a string). The
core reads every such field through these functions first, so that one
caller's odd value is refused (or ignored) on its own and never makes a
later commit fail for the rest of the batch.

>>> http_status(404), http_status(70000), http_status(-1), http_status("200")
(404, None, None, None)
>>> as_float(10**400), as_float("0.5"), as_float(object())
(None, 0.5, None)
>>> url_list([b"http://a.test/", 5, "http://b.test/"])
['http://a.test/', 'http://b.test/']
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# HTTP status codes are three digits (RFC 9110, section 15); the page
# table keeps them in 16 bits.
MIN_STATUS = 100
MAX_STATUS = 999


def http_status(value: Any) -> int | None:
    """``value`` as an HTTP status code, or None when it is not one
    (another type, or outside 100..999)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        return None
    value = int(value)
    return value if MIN_STATUS <= value <= MAX_STATUS else None


def as_float(value: Any, finite: bool = False) -> float | None:
    """``float(value)``, or None when that fails (any exception: the value
    is a caller's object) or, with ``finite``, is not finite."""
    try:
        out = float(value)
    except Exception:  # noqa: BLE001 - a caller's __float__ may raise anything
        return None
    if finite and not math.isfinite(out):
        return None
    return out


def url_text(value: Any) -> str | None:
    """A URL as ``str`` (bytes decoded as UTF-8), or None when it is neither."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def url_list(value: Any) -> list[str]:
    """The URLs of a list such as ``meta[b'redirect_urls']``; entries that
    are not URLs are left out, a lone string counts as a list of one."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, bytearray)):
        value = [value]
    elif not isinstance(value, (list, tuple)):
        return []
    return [u for u in map(url_text, value) if u is not None]


def int_list(value: Any) -> list[int]:
    """Integers of a list such as ``meta[b'redirect_reasons']`` (others: 0)."""
    if not isinstance(value, (list, tuple)):
        return []
    return [v if isinstance(v, int) and not isinstance(v, bool) else 0 for v in value]


def body_bytes(value: Any) -> bytes:
    """A response body as bytes (a str in UTF-8); anything else counts as empty."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return b""


def content_hash_of(value: Any) -> int:
    """A content hash given with a response (a remote fetcher's): an
    integer of 64 bits, else 0 (none).

    >>> content_hash_of(12), content_hash_of(2**64), content_hash_of("12")
    (12, 0, 0)
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        return 0
    value = int(value)
    return value if 0 <= value < 1 << 64 else 0


def error_text(error: Any) -> str:
    """A fetch error as text (an error whose ``str`` fails: its type name)."""
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - a caller's __str__ may raise anything
        return type(error).__name__


__all__ = ["MAX_STATUS", "MIN_STATUS", "as_float", "body_bytes", "content_hash_of", "error_text", "http_status",
           "int_list", "url_list", "url_text"]
