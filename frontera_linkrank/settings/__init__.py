"""Read and validate the ``LINKRANK_*`` settings.

Every setting is one row of the table in :mod:`.table` (name, kind of
value, default, doc); :mod:`frontera_linkrank.default_settings` exposes the
defaults as module constants, like Scrapy's ``default_settings``.

:class:`LinkRankSettings` reads a source (Frontera ``Settings``, Scrapy
``Settings``, a dict, or another :class:`LinkRankSettings`), falls back to
the defaults, and checks each value and the combination, so a typo in a
project's settings fails at start-up with the setting's name instead of
deep inside a crawl. A ``LINKRANK_*`` name that is not in the table is an
error on every path.

``python -m frontera_linkrank.settings --markdown`` prints the settings
document (``docs/settings.md``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from .kinds import SettingsError
from .table import RANK_ALGORITHMS, TABLE, policy_rankings

PREFIX = "LINKRANK_"

# The choices, as earlier versions of this module exposed them.
POLICIES: tuple[str, ...] = TABLE["LINKRANK_POLICY"].kind.choices  # type: ignore[attr-defined]
RANK_EDGES: tuple[str, ...] = TABLE["LINKRANK_RANK_EDGES"].kind.choices  # type: ignore[attr-defined]
RECRAWL_POLICIES: tuple[str, ...] = TABLE["LINKRANK_RECRAWL_POLICY"].kind.choices  # type: ignore[attr-defined]
OMEGA_POLICIES: tuple[str, ...] = TABLE["LINKRANK_OMEGA_POLICY"].kind.choices  # type: ignore[attr-defined]
HISTORY_TIMES: tuple[str, ...] = TABLE["LINKRANK_HISTORY_TIME"].kind.choices  # type: ignore[attr-defined]

__all__ = [
    "HISTORY_TIMES",
    "OMEGA_POLICIES",
    "POLICIES",
    "policy_rankings",
    "RANK_ALGORITHMS",
    "RANK_EDGES",
    "RECRAWL_POLICIES",
    "TABLE",
    "LinkRankSettings",
    "SettingsError",
    "source_names",
    "unknown_setting",
]


def unknown_setting(name: str) -> SettingsError:
    """The error for a ``LINKRANK_*`` name that is not a setting (with the
    closest known name, for a typo)."""
    close = difflib.get_close_matches(name, TABLE, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return SettingsError(f"unknown setting {name} (the settings are listed in docs/settings.md{hint})")


def source_names(source: Any) -> Iterable[str]:
    """The setting names a source holds, to refuse unknown ones.

    Frontera ``Settings`` keep their values in ``.attributes``; Scrapy
    ``Settings`` and dicts are mappings. An object that only has ``get``
    cannot be listed (nothing is refused then).
    """
    if source is None:
        return ()
    attributes = getattr(source, "attributes", None)
    if isinstance(attributes, Mapping):
        return list(attributes)
    if isinstance(source, Mapping) or hasattr(source, "keys"):
        return list(source.keys())
    return ()


class LinkRankSettings:
    """Validated ``LINKRANK_*`` values as attributes without the prefix.

    Parameters
    ----------
    source : mapping-like, optional
        Frontera or Scrapy ``Settings``, a dict, or a :class:`LinkRankSettings`.
        A value of ``None`` there means the default.
    **overrides
        Values that win over ``source``, by full name or without the
        prefix (``DAMPING=0.9``).

    Raises
    ------
    SettingsError
        For an unknown ``LINKRANK_*`` name, a value the setting does not
        allow, or a combination that cannot work; the message names the
        setting.

    Examples
    --------
    >>> s = LinkRankSettings({"LINKRANK_DAMPING": "0.9"}, MAX_PAGES=100)
    >>> s.DAMPING, s.MAX_PAGES, s.POLICY, s.RANK_ALGORITHMS
    (0.9, 100, 'hybrid-push', ('pagerank', 'hits'))
    >>> try:
    ...     LinkRankSettings({"LINKRANK_POLCY": "fifo"})
    ... except SettingsError as e:
    ...     print(e.args[0].split(" (")[0], "/", e.args[0].split("; ")[1])
    unknown setting LINKRANK_POLCY / did you mean LINKRANK_POLICY?)
    """

    # Attributes set in __init__, one per setting (listed for type checkers).
    PATH: str
    SYNC: bool
    MAP_SIZE: int
    COMMIT_PAGES: int
    COMMIT_INTERVAL: float
    STATUS_INTERVAL: float
    CHECKPOINT_BYTES: int
    MAX_URL_LENGTH: int
    MAX_LINKS_PER_PAGE: int
    LOG_REJECTED: int
    DAMPING: float
    OMEGA_POLICY: str
    OMEGA_HOSTS: list[str]
    OMEGA_READ_EVERY: int
    HISTORY_WINDOW: float
    HISTORY_TIME: str
    INTERNAL_WEIGHT: float
    EXTERNAL_WEIGHT: float
    POLICY: str
    MAX_REQUESTS_PER_HOST: int
    MAX_PAGES_PER_HOST: int
    LEASE_TIMEOUT: float
    MAX_RETRIES: int
    RETRY_DELAY: float
    PUSH_THRESHOLD: float
    REQUEUE_TOLERANCE: float
    SEEDS_FILE: str | None
    MAX_PAGES: int
    BATCH_SIZE: int
    OVERUSED_SLOT_FACTOR: float
    LOG_INTERVAL: float
    RANK_ALGORITHMS: tuple[str, ...]
    RANK_EVERY_PAGES: int
    RANK_GROWTH: float
    RANK_INTERVAL: float
    RANK_BACKGROUND: bool
    RANK_PERSONALIZED: bool
    RANK_INTER_HOST: bool
    RANK_EDGES: str
    RANK_MEMORY_LIMIT: int
    RANK_TOLERANCE: float
    RANK_MAX_ITERATIONS: int
    HYBRID_WEIGHT: float
    RECRAWL: bool
    RECRAWL_POLICY: str
    RECRAWL_SHARE: float
    RECRAWL_IMPORTANCE: str
    RECRAWL_PRIOR_RATE: float
    RECRAWL_PRIOR_VISITS: float
    RECRAWL_MIN_INTERVAL: float
    RECRAWL_HISTORY: int
    RECRAWL_CONDITIONAL: bool
    RECRAWL_CALIBRATE_PAGES: int
    FRONTIER_URL: str | None
    CRAWL: str
    SPIDER_ID: str | None
    PREFETCH: int
    HEARTBEAT_INTERVAL: float
    CLOSE_WHEN_FINISHED: bool
    SECRET: str | None

    def __init__(self, source: Any = None, **overrides: Any) -> None:
        if isinstance(source, LinkRankSettings):
            source = source.as_dict()
        values = {name: s.default for name, s in TABLE.items()}
        for name in source_names(source):
            if isinstance(name, str) and name.startswith(PREFIX) and name not in TABLE:
                raise unknown_setting(name)
        if source is not None:
            for name in TABLE:
                got = source.get(name, None)
                if got is not None:
                    values[name] = got
        for key, value in overrides.items():
            name = key if key.startswith(PREFIX) else PREFIX + key
            if name not in TABLE:
                raise unknown_setting(name)
            values[name] = value
        for name, value in values.items():
            setattr(self, name[len(PREFIX) :], TABLE[name].check(value))
        self.validate_combination()

    def as_dict(self) -> dict[str, Any]:
        """The values by full name (a source for another settings object)."""
        return {name: getattr(self, s.key) for name, s in TABLE.items()}

    def __repr__(self) -> str:
        changed = {s.key: getattr(self, s.key) for s in TABLE.values() if getattr(self, s.key) != s.check(s.default)}
        return f"LinkRankSettings({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    def validate_combination(self) -> LinkRankSettings:
        """Check the rules between settings."""
        needed = policy_rankings(self.POLICY)
        if self.INTERNAL_WEIGHT == 0 and self.EXTERNAL_WEIGHT == 0:
            raise SettingsError("LINKRANK_INTERNAL_WEIGHT and LINKRANK_EXTERNAL_WEIGHT cannot both be 0")
        missing = set(needed) - set(self.RANK_ALGORITHMS)
        if missing:
            raise SettingsError(
                f"LINKRANK_POLICY={self.POLICY!r} needs LINKRANK_RANK_ALGORITHMS to include {sorted(missing)}"
            )
        if needed and not (self.RANK_EVERY_PAGES or self.RANK_INTERVAL):
            raise SettingsError(
                f"LINKRANK_POLICY={self.POLICY!r} needs periodic ranking: "
                "LINKRANK_RANK_EVERY_PAGES and LINKRANK_RANK_INTERVAL cannot both be 0"
            )
        if self.OMEGA_POLICY == "hosts" and not self.OMEGA_HOSTS:
            raise SettingsError("LINKRANK_OMEGA_POLICY='hosts' needs LINKRANK_OMEGA_HOSTS")
        return self
