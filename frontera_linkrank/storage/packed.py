"""MessagePack values for side tables: plain data in, plain data out.

Reading a value back builds only ``None``, ``bool``, ``int``, ``float``,
``str``, ``bytes``, lists, dicts, tuples, sets and frozensets: nothing read
from the database is ever called or imported, so a crafted database cannot
run code (pickle could). Dict keys keep their type (``b"fingerprint"`` and
``"fingerprint"`` are different keys both ways).

MessagePack has no tuple or set, so three extension types carry them, each
holding the MessagePack array of its items:

====  ===========
code  Python type
====  ===========
1     tuple
2     set
3     frozenset
====  ===========

Subclasses of the plain types are stored as their base type (an
``OrderedDict`` comes back a ``dict``); anything else (a function, a
response object, an integer beyond 64 bits, a cycle) is refused with
:class:`Unencodable`.

>>> c = Packed()
>>> v = {b"k": (1, "a"), "k": {2}, "l": [None, 1.5, b"x"]}
>>> c.decode(c.encode(v)) == v
True
>>> c.encode(lambda: 1)
Traceback (most recent call last):
...
frontera_linkrank.storage.packed.Unencodable: cannot store a value of type function
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

EXT_TUPLE, EXT_SET, EXT_FROZENSET = 1, 2, 3
_EXT_TYPES = {EXT_TUPLE: tuple, EXT_SET: set, EXT_FROZENSET: frozenset}
_BASES: tuple[type, ...] = (dict, list, str, bytes, int, float)  # a subclass is stored as its base


class Unencodable(TypeError):
    """A value that cannot be stored (its message names the type)."""


class Unreadable(ValueError):
    """A stored value that does not decode (a damaged or crafted database)."""


def _default(obj: Any) -> Any:
    # Called by the packer for every value that is not exactly a plain type.
    if isinstance(obj, tuple):
        return msgpack.ExtType(EXT_TUPLE, _pack(list(obj)))
    if isinstance(obj, frozenset):
        return msgpack.ExtType(EXT_FROZENSET, _pack(list(obj)))
    if isinstance(obj, set):
        return msgpack.ExtType(EXT_SET, _pack(list(obj)))
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, bool):
        return bool(obj)
    for base in _BASES:
        if isinstance(obj, base):
            return base(obj)
    raise Unencodable(f"cannot store a value of type {type(obj).__name__}")


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, strict_types=True, default=_default, datetime=False)


def _ext_hook(code: int, data: bytes) -> Any:
    kind = _EXT_TYPES.get(code)
    if kind is None:
        raise Unreadable(f"unknown extension type {code}")
    items = _unpack(data)
    if not isinstance(items, list):
        raise Unreadable(f"extension type {code} does not hold an array")
    return kind(items)


def _unpack(raw: bytes) -> Any:
    return msgpack.unpackb(raw, raw=False, strict_map_key=False, use_list=True, ext_hook=_ext_hook, timestamp=0)


def pack(value: Any) -> bytes:
    """The stored bytes of ``value``.

    Raises
    ------
    Unencodable
        ``value`` holds something that is not plain data.
    """
    try:
        return _pack(value)
    except Unencodable:
        raise
    except (TypeError, ValueError, OverflowError, RecursionError) as e:
        raise Unencodable(f"cannot store the value: {e}") from None


def unpack(raw: bytes | memoryview) -> Any:
    """The value stored as ``raw``.

    Raises
    ------
    Unreadable
        ``raw`` is not a value this module wrote.
    """
    try:
        value = _unpack(bytes(raw))
    except Unreadable:
        raise
    except Exception as e:  # any malformed input: truncated, extra bytes, too deep, unhashable keys...
        raise Unreadable(f"{type(e).__name__}: {e}") from None
    if isinstance(value, msgpack.Timestamp):
        raise Unreadable("a timestamp, not a value of this table")
    return value


def encodable(value: Any) -> bool:
    """True when :func:`pack` stores ``value``."""
    try:
        _pack(value)
    except Exception:
        return False
    return True


@dataclass(frozen=True)
class Packed:
    """A side table codec (see :mod:`.sidetable`) for plain data as MessagePack."""

    merge = None

    def encode(self, value: Any) -> bytes:
        return pack(value)

    def decode(self, raw: bytes | memoryview) -> Any:
        return unpack(raw)


__all__ = ["EXT_FROZENSET", "EXT_SET", "EXT_TUPLE", "Packed", "Unencodable", "Unreadable", "encodable", "pack",
           "unpack"]
