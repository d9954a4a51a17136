"""URL checks, host names and fingerprints.

A page is keyed by the 20-byte SHA-1 of its canonical URL, the same
fingerprint Frontera's ``UrlFingerprintMiddleware`` puts in
``meta[b'fingerprint']`` (as 40 hex digits), so the key never hits LMDB's
511-byte limit whatever the URL. The URL itself is stored as given (UTF-8).

Only URLs the crawler could fetch are stored: http(s), a host name, no
more than the length limit, encodable as UTF-8. Everything else raises
:class:`RejectedURL` with a short reason that the backend counts.
"""

import binascii
import hashlib
import re
from urllib.parse import urlsplit

from w3lib.url import canonicalize_url, safe_url_string

# Characters allowed in a host name as the crawler sees it (after IDNA).
# Underscores are not valid in DNS names but are common on the web.
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-_")
# Fast path for the common case: http(s), a plain host name, optional port.
_SIMPLE = re.compile(r"(?i)https?://([a-z0-9._-]+)(?::([0-9]{1,5}))?(?:[/?#]|$)")


class RejectedURL(ValueError):
    """A URL the frontier will not store; ``reason`` is a short stats key."""

    def __init__(self, reason: str, url: str) -> None:
        super().__init__(f"{reason}: {url[:200]!r}")
        self.reason = reason
        self.url = url


def fingerprint(url: str | bytes) -> bytes:
    """Frontera's URL fingerprint as 20 raw bytes: sha1(canonicalize_url(url)).

    >>> fingerprint("http://example.com/?b=2&a=1").hex() == fingerprint("http://example.com/?a=1&b=2").hex()
    True
    """
    if not isinstance(url, (str, bytes)):
        raise RejectedURL("malformed", repr(url))
    try:
        return hashlib.sha1(canonicalize_url(url).encode("ascii")).digest()
    except (ValueError, UnicodeError) as e:
        raise RejectedURL(_reason(url, e), str(url)) from None


def _reason(url: str | bytes, exc: Exception) -> str:
    if isinstance(exc, UnicodeError):
        return "invalid_utf8"
    return "malformed"


def fingerprint_key(value: bytes | str) -> bytes:
    """20-byte key from a ``meta[b'fingerprint']`` value (40 hex digits,
    bytes or str). Any other fingerprint function's output is hashed to 20
    bytes, so keys stay fixed-size."""
    if len(value) == 40:
        try:
            return binascii.unhexlify(value)
        except (binascii.Error, ValueError):
            pass
    if isinstance(value, str):
        text = value
        try:
            value = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate outside the escape range
            value = text.encode("utf-8", "surrogatepass")
    return hashlib.sha1(value).digest()


def check_url(url: str | bytes, max_length: int = 0) -> str:
    """Validate ``url`` and return its host name (lower case, IDNA).

    Raises :class:`RejectedURL` with reason ``too_long``, ``invalid_utf8``,
    ``scheme`` (not http/https) or ``malformed``.

    >>> check_url("HTTP://Example.COM:8080/a")
    'example.com'
    >>> check_url("http://bücher.de/")
    'xn--bcher-kva.de'
    """
    if not isinstance(url, str):
        if not isinstance(url, bytes):
            raise RejectedURL("malformed", repr(url))
        try:
            url = url.decode("utf-8")
        except UnicodeDecodeError:
            raise RejectedURL("invalid_utf8", repr(url)) from None
    if max_length and len(url) > max_length:
        raise RejectedURL("too_long", url)
    m = _SIMPLE.match(url)  # (no '@' can precede its end: userinfo takes the slow path)
    if m is not None:
        host, port = m.groups()
        if port is None or int(port) < 65536:
            return host if host.islower() else host.lower()
    if not url.isascii():
        try:
            url.encode("utf-8")
            url = safe_url_string(url)
        except UnicodeError:
            raise RejectedURL("invalid_utf8", url) from None
        except ValueError:
            raise RejectedURL("malformed", url) from None
    head = url[:8].lower()
    if not (head.startswith("http://") or head.startswith("https://")):
        colon = url.find(":")
        if 0 < colon < 32 and url[:colon].isalnum():
            raise RejectedURL("scheme", url)
        raise RejectedURL("malformed", url)
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        raise RejectedURL("malformed", url) from None
    if not host:
        raise RejectedURL("malformed", url)
    # Spaces and the like in the path are fine (Scrapy percent-encodes
    # them); in the host they make the URL unfetchable.
    if not _HOST_CHARS.issuperset(host) and ":" not in host:  # ':' = IPv6
        raise RejectedURL("malformed", url)
    return host
