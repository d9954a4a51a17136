"""Read and validate ``LINKRANK_*`` settings.

:class:`LinkRankSettings` takes any mapping-like source with a ``get``
(Frontera ``Settings``, Scrapy ``Settings`` or a dict), falls back to
:mod:`frontera_linkrank.default_settings`, and checks each value, so a typo
in a project's settings fails at start-up with the setting's name instead
of deep inside a crawl.
"""

import math
import os

from . import default_settings

POLICIES = ("opic", "fifo", "score", "pagerank", "hits", "hybrid")
RANK_ALGORITHMS = ("pagerank", "hits")
RANK_EDGES = ("auto", "memory", "stream")
RECRAWL_POLICIES = ("value", "uniform", "change_rate")
# Rankings each policy needs recomputed.
POLICY_RANKINGS = {"pagerank": ("pagerank",), "hybrid": ("pagerank",), "hits": ("hits",)}
OMEGA_POLICIES = ("all", "unfetched", "fetched", "hosts")
HISTORY_TIMES = ("wall", "cash")


class SettingsError(ValueError):
    """A ``LINKRANK_*`` setting has an invalid value."""


def _names():
    return [n for n in dir(default_settings) if n.startswith("LINKRANK_")]


class LinkRankSettings:
    """Validated ``LINKRANK_*`` values as attributes (``s.DAMPING`` ...).

    >>> s = LinkRankSettings({"LINKRANK_DAMPING": 0.9})
    >>> s.DAMPING, s.POLICY
    (0.9, 'hybrid')
    """

    def __init__(self, source=None, **overrides):
        values = {}
        for name in _names():
            value = getattr(default_settings, name)
            if source is not None:
                got = source.get(name, None)
                if got is not None:
                    value = got
            values[name] = value
        for key, value in overrides.items():
            name = key if key.startswith("LINKRANK_") else "LINKRANK_" + key
            if name not in values:
                raise SettingsError(f"unknown setting {name}")
            values[name] = value
        for name, value in values.items():
            setattr(self, name[len("LINKRANK_") :], self._check(name, value))
        self.validate_combination()

    # Each checker returns the normalised value or raises SettingsError.
    def _check(self, name, value):
        check = getattr(self, "_check_" + name[len("LINKRANK_") :].lower(), None)
        try:
            return check(value) if check else value
        except SettingsError as e:
            raise SettingsError(f"{name}={value!r}: {e}") from None
        except (TypeError, ValueError) as e:
            raise SettingsError(f"{name}={value!r}: {e}") from None

    @staticmethod
    def _choice(value, choices):
        v = str(value).lower()
        if v not in choices:
            raise SettingsError("must be one of " + ", ".join(choices))
        return v

    @staticmethod
    def _number(value, lo=None, hi=None, integer=False, open_lo=False):
        if isinstance(value, bool):
            raise SettingsError("must be a number")
        v = int(value) if integer else float(value)
        if integer and float(value) != v:
            raise SettingsError("must be an integer")
        if not integer and math.isnan(v):
            raise SettingsError("must be a number")
        if lo is not None and (v < lo or (open_lo and v == lo)):
            raise SettingsError(f"must be {'>' if open_lo else '>='} {lo}")
        if hi is not None and v > hi:
            raise SettingsError(f"must be <= {hi}")
        return v

    @staticmethod
    def _bool(value):
        if isinstance(value, str):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off", ""):
                return False
            raise SettingsError("must be a boolean")
        return bool(value)

    def _check_path(self, v):
        if not str(v):
            raise SettingsError("must be a directory path")
        return str(v)

    def _check_sync(self, v):
        return self._bool(v)

    def _check_map_size(self, v):
        return self._number(v, lo=1 << 20, integer=True)

    def _check_commit_pages(self, v):
        return self._number(v, lo=1, integer=True)

    def _check_commit_interval(self, v):
        return self._number(v, lo=0)

    def _check_checkpoint_bytes(self, v):
        return self._number(v, lo=1 << 16, integer=True)

    def _check_max_url_length(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_max_links_per_page(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_log_rejected(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_damping(self, v):
        v = self._number(v, lo=0, hi=1)
        if v >= 1:
            raise SettingsError("must be < 1 (cash must leak to the virtual page)")
        return v

    def _check_omega_policy(self, v):
        return self._choice(v, OMEGA_POLICIES)

    def _check_omega_hosts(self, v):
        if isinstance(v, str):
            v = [h for h in v.replace(",", " ").split() if h]
        return sorted({str(h).strip().lower().rstrip(".") for h in v})

    def _check_omega_read_every(self, v):
        return self._number(v, lo=1, integer=True)

    def _check_history_window(self, v):
        if v in (None, 0, "", "inf", "none", "None"):
            return math.inf
        return self._number(v, lo=0, open_lo=True)

    def _check_history_time(self, v):
        return self._choice(v, HISTORY_TIMES)

    def _check_internal_weight(self, v):
        return self._number(v, lo=0)

    def _check_external_weight(self, v):
        return self._number(v, lo=0)

    def _check_policy(self, v):
        return self._choice(v, POLICIES)

    def _check_max_requests_per_host(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_max_pages_per_host(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_lease_timeout(self, v):
        return self._number(v, lo=0, open_lo=True)

    def _check_max_retries(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_retry_delay(self, v):
        return self._number(v, lo=0)

    # Scrapy scheduler
    def _check_seeds_file(self, v):
        if v is None or v == "":
            return None
        if not isinstance(v, (str, os.PathLike)):
            raise SettingsError("must be a file path")
        return os.fspath(v)

    def _check_max_pages(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_batch_size(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_overused_slot_factor(self, v):
        return self._number(v, lo=0, open_lo=True)

    def _check_log_interval(self, v):
        return self._number(v, lo=0)

    def _check_rank_algorithms(self, v):
        if v is None or v == "":
            return None  # what the policy needs (validate_combination)
        if isinstance(v, str):
            v = v.replace(",", " ").split()
        out = []
        for a in v:
            a = self._choice(a, RANK_ALGORITHMS + ("both",))
            out += list(RANK_ALGORITHMS) if a == "both" else [a]
        return tuple(a for a in RANK_ALGORITHMS if a in out)

    def _check_rank_every_pages(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_rank_growth(self, v):
        return self._number(v, lo=0)

    def _check_rank_interval(self, v):
        return self._number(v, lo=0)

    def _check_rank_background(self, v):
        return self._bool(v)

    def _check_rank_personalized(self, v):
        return self._bool(v)

    def _check_rank_inter_host(self, v):
        return self._bool(v)

    def _check_rank_edges(self, v):
        return self._choice(v, RANK_EDGES)

    def _check_rank_memory_limit(self, v):
        return self._number(v, lo=0, integer=True)

    def _check_rank_tolerance(self, v):
        return self._number(v, lo=0, open_lo=True)

    def _check_rank_max_iterations(self, v):
        return self._number(v, lo=1, integer=True)

    def _check_hybrid_weight(self, v):
        return self._number(v, lo=0)

    def _check_recrawl(self, v):
        return self._bool(v)

    def _check_recrawl_policy(self, v):
        return self._choice(v, RECRAWL_POLICIES)

    def _check_recrawl_share(self, v):
        return self._number(v, lo=0, hi=1)

    def _check_recrawl_importance(self, v):
        return self._choice(v, ("aopic", "pagerank"))

    def _check_recrawl_prior_rate(self, v):
        return self._number(v, lo=0, open_lo=True)

    def _check_recrawl_prior_visits(self, v):
        return self._number(v, lo=0)

    def _check_recrawl_min_interval(self, v):
        return self._number(v, lo=0)

    def _check_recrawl_history(self, v):
        return self._number(v, lo=2, integer=True)

    def _check_recrawl_conditional(self, v):
        return self._bool(v)

    def _check_recrawl_calibrate_pages(self, v):
        return self._number(v, lo=1, integer=True)

    def validate_combination(self):
        if self.RANK_ALGORITHMS is None:
            wanted = set(POLICY_RANKINGS.get(self.POLICY, ()))
            if self.RECRAWL and self.RECRAWL_IMPORTANCE == "pagerank":
                wanted.add("pagerank")
            self.RANK_ALGORITHMS = tuple(a for a in RANK_ALGORITHMS if a in wanted)
        if self.INTERNAL_WEIGHT == 0 and self.EXTERNAL_WEIGHT == 0:
            raise SettingsError(
                "LINKRANK_INTERNAL_WEIGHT and LINKRANK_EXTERNAL_WEIGHT cannot both be 0"
            )
        missing = set(POLICY_RANKINGS.get(self.POLICY, ())) - set(self.RANK_ALGORITHMS)
        if missing:
            raise SettingsError(
                f"LINKRANK_POLICY={self.POLICY!r} needs LINKRANK_RANK_ALGORITHMS to include {sorted(missing)}"
            )
        if self.POLICY in POLICY_RANKINGS and not (self.RANK_EVERY_PAGES or self.RANK_INTERVAL):
            raise SettingsError(
                f"LINKRANK_POLICY={self.POLICY!r} needs periodic ranking: "
                "LINKRANK_RANK_EVERY_PAGES and LINKRANK_RANK_INTERVAL cannot both be 0"
            )
        if self.OMEGA_POLICY == "hosts" and not self.OMEGA_HOSTS:
            raise SettingsError(
                "LINKRANK_OMEGA_POLICY='hosts' needs LINKRANK_OMEGA_HOSTS"
            )
        return self
