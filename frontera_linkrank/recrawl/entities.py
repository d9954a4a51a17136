"""HTML character references decoded as :func:`html.unescape` does, in
time linear in the input whatever it holds.

``html.unescape`` calls a Python function for every ``&`` it finds, so a
page of ``&a&a&a…`` costs about a microsecond per two bytes, and a
decimal reference of more than 4,300 digits raises ``ValueError``. Here
the text is split at the references (one regular expression pass in C),
each *distinct* reference is decoded once, and the parts are joined
again. The result is the same as ``html.unescape`` on every input where
that returns; an over-long numeric reference gives U+FFFD (it is beyond
the last code point) instead of an exception.

>>> unescape("a &amp; b &lt;&#62; &notit; &#x20AC;")
'a & b <> ¬it; €'
"""

from __future__ import annotations

import html
import re
from html.entities import html5 as _HTML5

# The standard library's pattern (html._charref): ``split`` keeps its group,
# what follows the '&', and drops the '&'.
_REF = r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;{extra}]{{1,32}};?)"
CHARREF = re.compile(_REF.format(extra=""))
# For text where NUL separates items: a reference never runs over one.
CHARREF_NO_NUL = re.compile(_REF.format(extra="\x00"))

# A name without its ';' can only be one of the legacy names, the
# longest of which has 6 letters: prefixes longer than that never match.
_LEGACY_MAX = max(len(k) for k in _HTML5 if not k.endswith(";"))
_PREFIX2 = frozenset(k[:2] for k in _HTML5)


def _special(num: int) -> bool:
    """Code points the standard maps through its own table (or drops)."""
    return num < 0x20 or 0x7F <= num <= 0x9F or 0xFDD0 <= num <= 0xFDEF or (num & 0xFFFE) == 0xFFFE


# At most a few hundred: decoded by the standard library once, at import.
_SPECIAL = {
    n: html.unescape(f"&#{n};")
    for n in [*range(0x20), *range(0x7F, 0xA0), *range(0xFDD0, 0xFDF0)]
    + [(p << 16) | low for p in range(0x11) for low in (0xFFFE, 0xFFFF)]
}


def _numeric(digits: str, base: int) -> str:
    digits = digits.rstrip(";").lstrip("0") or "0"
    # 0x10FFFF has 7 decimal or 6 hex digits: anything longer is beyond it
    # (and int() of a long enough string raises instead of returning).
    if len(digits) > (7 if base == 10 else 6):
        return "\ufffd"
    num = int(digits, base)
    if 0xD800 <= num <= 0xDFFF or num > 0x10FFFF:
        return "\ufffd"
    if _special(num):
        return _SPECIAL[num]
    return chr(num)


def decode_reference(ref: str) -> str:
    """The text a reference stands for; ``ref`` is what follows the ``&``
    (as matched by :data:`CHARREF`), the result as ``html.unescape``."""
    if ref[0] == "#":
        if ref[1] in "xX":
            return _numeric(ref[2:], 16)
        return _numeric(ref[1:], 10)
    if ref[:2] in _PREFIX2:
        value = _HTML5.get(ref)
        if value is not None:
            return value
        # the longest legacy name the reference starts with, as the standard says
        for x in range(min(len(ref) - 1, _LEGACY_MAX), 1, -1):
            value = _HTML5.get(ref[:x])
            if value is not None:
                return value + ref[x:]
    return "&" + ref


def unescape(text: str, pattern: re.Pattern[str] = CHARREF) -> str:
    """``html.unescape(text)``, in linear time (see the module's docstring).

    Parameters
    ----------
    text : str
        The text to decode.
    pattern : re.Pattern
        :data:`CHARREF`, or :data:`CHARREF_NO_NUL` for NUL-separated items.
    """
    if "&" not in text:
        return text
    parts = pattern.split(text)
    refs = parts[1::2]
    table = {r: decode_reference(r) for r in set(refs)}
    parts[1::2] = map(table.__getitem__, refs)
    return "".join(parts)
