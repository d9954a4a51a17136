"""Kinds of setting values: one checker per type, shared by every setting.

A :class:`Kind` turns a raw value (from a Python settings module, a dict,
or a string given on the command line with ``scrapy -s``) into the
normalised value the frontier uses, or raises :class:`SettingsError` with
what is allowed; :class:`Setting` adds the name to the message. Each kind
also describes what it allows, for the generated settings table.

Examples
--------
>>> Int(lo=0).check("500"), Float(lo=0).check("2.5"), Bool().check("off")
(500, 2.5, False)
>>> Float(lo=0).check("inf")
Traceback (most recent call last):
...
frontera_linkrank.settings.SettingsError: must be a finite number
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")
INFINITE = ("", "inf", "infinity", "none")  # history window: no window


class SettingsError(ValueError):
    """A ``LINKRANK_*`` setting is unknown, has an invalid value, or does
    not go with the others."""

    __module__ = "frontera_linkrank.settings"  # where users import it from


def _code(value: Any) -> str:
    return f"`{value!r}`"


class Kind:
    """How the values of a setting are checked, normalised and documented."""

    def check(self, value: Any) -> Any:
        """The normalised value; raises :class:`SettingsError` (without the
        setting's name) if ``value`` is not allowed."""
        raise NotImplementedError

    def allowed(self) -> str:
        """What the kind allows, in Markdown (one table cell)."""
        raise NotImplementedError

    def show(self, default: Any) -> str:
        """A default value as the user would write it, in Markdown."""
        return _code(default)


class Bool(Kind):
    """``True``/``False``, 0/1, or a string such as ``"true"`` or ``"off"``."""

    def check(self, value: Any) -> bool:
        if isinstance(value, str):
            low = value.strip().lower()
            if low in TRUE or low in FALSE:
                return low in TRUE
        elif isinstance(value, numbers.Integral) or type(value).__name__ == "bool_":  # numpy.bool_
            if value in (0, 1):
                return bool(value)
        raise SettingsError("must be a boolean")

    def allowed(self) -> str:
        return "boolean"


@dataclass(frozen=True)
class Number(Kind):
    """A finite number in ``[lo, hi]`` (either end may be open or absent).

    ``why`` is added to the message when a bound is crossed.
    """

    lo: float | None = None
    hi: float | None = None
    open_lo: bool = False
    open_hi: bool = False
    why: str = ""
    noun = "number"

    def _in_range(self, v: Any) -> Any:
        bad = None
        if self.lo is not None and (v < self.lo or (self.open_lo and v == self.lo)):
            bad = f"must be {'>' if self.open_lo else '>='} {self.lo}"
        elif self.hi is not None and (v > self.hi or (self.open_hi and v == self.hi)):
            bad = f"must be {'<' if self.open_hi else '<='} {self.hi}"
        if bad:
            raise SettingsError(bad + (f" ({self.why})" if self.why else ""))
        return v

    def bound(self, x: float) -> str:
        """A bound as the docs show it."""
        return str(x)

    def allowed(self) -> str:
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            left, right = "(" if self.open_lo else "[", ")" if self.open_hi else "]"
            return f"{self.noun} in {left}{self.bound(lo)}, {self.bound(hi)}{right}"
        if lo is not None:
            return f"{self.noun} {'>' if self.open_lo else '≥'} {self.bound(lo)}"
        if hi is not None:
            return f"{self.noun} {'<' if self.open_hi else '≤'} {self.bound(hi)}"
        return self.noun


@dataclass(frozen=True)
class Float(Number):
    """A finite float (a string such as ``"2.5"`` is parsed)."""

    def check(self, value: Any) -> float:
        if isinstance(value, bool):
            raise SettingsError("must be a number")
        try:
            v = float(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise SettingsError("must be a number") from None
        if math.isnan(v):
            raise SettingsError("must be a number")
        if math.isinf(v):
            raise SettingsError("must be a finite number")
        return self._in_range(v)


@dataclass(frozen=True)
class Int(Number):
    """An integer (also ``"500"``, ``"1e6"`` or ``2000.0``, but not ``1.5``)."""

    noun = "integer"
    in_bytes: bool = False  # documented with its size in MiB/GiB

    def _in_range(self, v: Any) -> Any:
        if not -(1 << 63) <= v < 1 << 63:  # stored in int64 arrays and LMDB
            raise SettingsError("must be a 64-bit integer")
        return super()._in_range(v)

    def check(self, value: Any) -> int:
        if isinstance(value, bool):
            raise SettingsError("must be an integer")
        if isinstance(value, numbers.Integral):
            return self._in_range(int(value))
        try:
            f = float(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise SettingsError("must be an integer") from None
        if not math.isfinite(f) or f != int(f):
            raise SettingsError("must be an integer")
        if isinstance(value, str):
            try:  # exact for integers beyond float precision
                return self._in_range(int(value.strip()))
            except ValueError:
                pass
        return self._in_range(int(f))

    def bound(self, x: float) -> str:
        return f"{x} ({_size(int(x))})" if self.in_bytes and _size(int(x)) else str(x)

    def show(self, default: Any) -> str:
        if self.in_bytes and _size(default):
            power = next(p for p in (3, 2, 1) if default % (1 << (10 * p)) == 0)
            factor = "1024" if power == 1 else f"1024**{power}"
            return f"`{default >> (10 * power)} * {factor}` ({_size(default)})"
        return _code(default)


def _size(n: int) -> str:
    """``n`` bytes as whole KiB, MiB or GiB ("" if not a whole number of KiB)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return ""


@dataclass(frozen=True)
class Choice(Kind):
    """One of ``choices`` (case-insensitive, normalised to lower case); a
    live view such as a registry's ``keys()`` follows later registrations."""

    choices: Collection[str]

    def check(self, value: Any) -> str:
        v = str(value).strip().lower()
        if v not in self.choices:
            raise SettingsError("must be one of " + ", ".join(self.choices))
        return v

    def allowed(self) -> str:
        return "one of " + ", ".join(f"`{c}`" for c in self.choices)


class Path(Kind):
    """A non-empty path (str or ``os.PathLike``), returned as str."""

    def check(self, value: Any) -> str:
        if isinstance(value, (str, os.PathLike)):
            v = os.fspath(value)
            if isinstance(v, str) and v:
                return v
        raise SettingsError("must be a directory path")

    def allowed(self) -> str:
        return "directory path"


class OptionalPath(Kind):
    """A file path, or ``None``/``""`` for none."""

    def check(self, value: Any) -> str | None:
        if value is None or value == "":
            return None
        if isinstance(value, (str, os.PathLike)):
            v = os.fspath(value)
            if isinstance(v, str):
                return v
        raise SettingsError("must be a file path")

    def allowed(self) -> str:
        return "file path or `None`"


class BrokerURL(Kind):
    """A broker URL (``redis://``, ``rediss://`` or ``unix://``), or ``None``/``""`` for none."""

    SCHEMES = ("redis://", "rediss://", "unix://")

    def check(self, value: Any) -> str | None:
        if value is None or value == "":
            return None
        if isinstance(value, str) and value.startswith(self.SCHEMES) and len(value) > len("unix://"):
            return value
        raise SettingsError("must be a redis://HOST:PORT/DB, rediss:// or unix:// URL")

    def allowed(self) -> str:
        return "`redis://`, `rediss://` or `unix://` URL, or `None`"


class Name(Kind):
    """A short name of letters, digits and ``._-`` (or None when ``optional``)."""

    def __init__(self, optional: bool = False) -> None:
        self.optional = optional

    def check(self, value: Any) -> str | None:
        if self.optional and (value is None or value == ""):
            return None
        v = str(value).strip() if isinstance(value, str) else ""
        if v and len(v) <= 100 and all(c.isalnum() or c in "._-" for c in v):
            return v
        raise SettingsError("must be a name of letters, digits, '.', '_' or '-' (at most 100)")

    def allowed(self) -> str:
        return "name (letters, digits, `._-`)" + (" or `None`" if self.optional else "")


class Secret(Kind):
    """A non-empty string kept secret (or ``None``/``""`` for none); the docs never show a value."""

    def check(self, value: Any) -> str | None:
        if value is None or value == "":
            return None
        if isinstance(value, str):
            return value
        raise SettingsError("must be a string")

    def allowed(self) -> str:
        return "string or `None`"


class HostList(Kind):
    """Host names: a list, or one string separated by commas or spaces.
    Normalised to a sorted list of distinct lower-case names without a
    trailing dot."""

    def check(self, value: Any) -> list[str]:
        if isinstance(value, str):
            value = value.replace(",", " ").split()
        elif not isinstance(value, (list, tuple, set, frozenset)):
            raise SettingsError("must be a list of host names")
        return sorted({str(h).strip().lower().rstrip(".") for h in value} - {""})

    def allowed(self) -> str:
        return "list of host names (or a comma-separated string)"

    def show(self, default: Any) -> str:
        return _code(list(default))


@dataclass(frozen=True)
class AlgorithmList(Kind):
    """Some of ``choices`` (a list, or a string separated by commas or
    spaces; ``"both"`` names them all, ``"none"`` none), normalised to a
    tuple in the order of ``choices``."""

    choices: tuple[str, ...]
    everything: str = "both"
    nothing: str = "none"

    def check(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str) and value.strip().lower() in (self.nothing, ""):
            return ()
        if isinstance(value, str):
            value = value.replace(",", " ").split()
        elif not isinstance(value, (list, tuple, set, frozenset)):
            raise SettingsError("must be a list of " + ", ".join(self.choices))
        names = Choice((*self.choices, self.everything))
        wanted: set[str] = set()
        for item in value:
            name = names.check(item)
            wanted.update(self.choices if name == self.everything else (name,))
        return tuple(a for a in self.choices if a in wanted)

    def allowed(self) -> str:
        names = ", ".join(f"`{c}`" for c in self.choices)
        return f"list of {names} (`{self.everything}`: all, `{self.nothing}`: none)"


class Window(Kind):
    """A positive duration, or ``None``, 0 or ``"inf"`` for an infinite one
    (normalised to ``math.inf``)."""

    def check(self, value: Any) -> float:
        if value is None or (isinstance(value, str) and value.strip().lower() in INFINITE):
            return math.inf
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and value == math.inf:
            return math.inf
        v = Float().check(value)
        if v == 0:
            return math.inf
        if v < 0:
            raise SettingsError("must be > 0 (or None, 0 or inf: no window)")
        return v

    def allowed(self) -> str:
        return "number > 0, or `None`/`0`/`inf`: infinite"


@dataclass(frozen=True)
class Setting:
    """One ``LINKRANK_*`` setting: a row of the settings table.

    Attributes
    ----------
    name : str
        Full name, ``LINKRANK_...``.
    kind : Kind
        Checks and normalises its values.
    default : object
        Value when the settings do not give one (or give ``None``).
    doc : str
        One line: what it does.
    details : str
        Longer explanation for the settings document (optional).
    shown : str
        The default as the docs show it, when its repr is unclear
        (``"1 / 86400"``); Markdown without the backquotes.
    advanced : bool
        Most crawls never change it (it tunes storage, the estimators or
        the schedules, and its default is measured): the settings document
        lists it apart, under its section's "advanced" heading.
    """

    name: str
    kind: Kind
    default: Any
    doc: str
    details: str = ""
    shown: str = ""
    advanced: bool = False

    @property
    def key(self) -> str:
        """The name without ``LINKRANK_`` (the attribute of the settings object)."""
        return self.name[len("LINKRANK_") :]

    def check(self, value: Any) -> Any:
        """The normalised value; the error names the setting and the value."""
        try:
            return self.kind.check(value)
        except SettingsError as e:
            raise SettingsError(f"{self.name}={value!r}: {e}") from None

    def show_default(self) -> str:
        """The default as the docs show it, in Markdown."""
        return f"`{self.shown}`" if self.shown else self.kind.show(self.default)
