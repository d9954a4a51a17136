"""The settings table: defaults, validation on every path, choices from
their owners, and the generated settings document."""

import math
import os

import pytest
from frontera import FrontierManager
from frontera import Settings as FronteraSettings
from scrapy.settings import Settings as ScrapySettings

from frontera_linkrank import default_settings
from frontera_linkrank.recrawl.scheduler import POLICIES as RECRAWL_POLICIES
from frontera_linkrank.scheduling.policies import POLICIES
from frontera_linkrank.scoring import aopic, ranker
from frontera_linkrank.scrapy.config import linkrank_settings
from frontera_linkrank.settings import TABLE, LinkRankSettings, SettingsError
from frontera_linkrank.settings.kinds import Float, Int, Kind
from frontera_linkrank.settings.markdown import BEGIN, markdown_document, markdown_table, readme_block
from frontera_linkrank.settings.table import SECTIONS
from frontera_linkrank.storage.vertices import VertexTable

ROOT = os.path.join(os.path.dirname(__file__), "..")
FLOATS = [name for name, s in TABLE.items() if isinstance(s.kind, Float)]
INTS = [name for name, s in TABLE.items() if isinstance(s.kind, Int)]


# -- the table and the defaults --------------------------------------------------------------
def test_every_setting_has_a_default_that_validates():
    assert len(TABLE) == sum(len(section.settings) for section in SECTIONS)  # no name twice
    s = LinkRankSettings()
    for name, setting in TABLE.items():
        assert name.startswith("LINKRANK_") and isinstance(setting.kind, Kind)
        assert setting.doc and "\n" not in setting.doc, name
        assert getattr(s, setting.key) == setting.check(setting.default) or name == "LINKRANK_RANK_ALGORITHMS"
        assert name in LinkRankSettings.__annotations__ or setting.key in LinkRankSettings.__annotations__, name


def test_default_settings_module_exposes_every_setting():
    names = {n for n in dir(default_settings) if n.startswith("LINKRANK_")}
    assert names == set(TABLE)
    for name, setting in TABLE.items():
        assert getattr(default_settings, name) == setting.default
    # It works as a settings module for Frontera (and so for Scrapy's setmodule).
    fs = FronteraSettings(module=default_settings)
    assert fs.get("LINKRANK_POLICY") == "hybrid-push"
    assert LinkRankSettings(fs).POLICY == "hybrid-push"
    assert LinkRankSettings(ScrapySettings({n: getattr(default_settings, n) for n in names})).DAMPING == 0.85


def test_values_as_strings_are_accepted():
    """What ``scrapy -s NAME=VALUE`` or an environment gives: strings."""
    s = LinkRankSettings({
        "LINKRANK_SYNC": "false", "LINKRANK_RECRAWL": "On", "LINKRANK_MAX_PAGES": "500",
        "LINKRANK_MAP_SIZE": "1e9", "LINKRANK_DAMPING": " 0.9 ", "LINKRANK_POLICY": "FIFO",
        "LINKRANK_OMEGA_POLICY": "hosts", "LINKRANK_OMEGA_HOSTS": "A.test., b.test a.test",
        "LINKRANK_RANK_ALGORITHMS": "hits, pagerank", "LINKRANK_HISTORY_WINDOW": "inf",
        "LINKRANK_SEEDS_FILE": "seeds.txt",
    })  # fmt: skip
    assert (s.SYNC, s.RECRAWL, s.MAX_PAGES, s.MAP_SIZE, s.DAMPING, s.POLICY) == (False, True, 500, 10**9, 0.9, "fifo")
    assert s.OMEGA_HOSTS == ["a.test", "b.test"]
    assert s.RANK_ALGORITHMS == ("pagerank", "hits")
    assert s.HISTORY_WINDOW == math.inf and s.SEEDS_FILE == "seeds.txt"
    assert LinkRankSettings(RANK_ALGORITHMS="both").RANK_ALGORITHMS == ("pagerank", "hits")


@pytest.mark.parametrize("value", [None, 0, 0.0, "", "0", "inf", "None", math.inf])
def test_history_window_none_zero_or_inf_is_infinite(value):
    assert LinkRankSettings(HISTORY_WINDOW=value).HISTORY_WINDOW == math.inf


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("LINKRANK_POLICY", "best", "LINKRANK_POLICY='best': must be one of opic, fifo"),
        ("LINKRANK_MAX_PAGES", "-1", "LINKRANK_MAX_PAGES='-1': must be >= 0"),
        ("LINKRANK_MAX_PAGES", 1.5, "LINKRANK_MAX_PAGES=1.5: must be an integer"),
        ("LINKRANK_MAX_PAGES", True, "LINKRANK_MAX_PAGES=True: must be an integer"),
        ("LINKRANK_MAP_SIZE", 1000, "LINKRANK_MAP_SIZE=1000: must be >= 1048576"),
        ("LINKRANK_DAMPING", 1, "LINKRANK_DAMPING=1: must be < 1 (cash must leak to the virtual page)"),
        ("LINKRANK_DAMPING", "x", "LINKRANK_DAMPING='x': must be a number"),
        ("LINKRANK_OVERUSED_SLOT_FACTOR", 0, "LINKRANK_OVERUSED_SLOT_FACTOR=0: must be > 0"),
        ("LINKRANK_RECRAWL_SHARE", 1.5, "LINKRANK_RECRAWL_SHARE=1.5: must be <= 1"),
        ("LINKRANK_SYNC", "maybe", "LINKRANK_SYNC='maybe': must be a boolean"),
        ("LINKRANK_SYNC", 2, "LINKRANK_SYNC=2: must be a boolean"),
        ("LINKRANK_SEEDS_FILE", 3, "LINKRANK_SEEDS_FILE=3: must be a file path"),
        ("LINKRANK_PATH", 3, "LINKRANK_PATH=3: must be a directory path"),
        ("LINKRANK_OMEGA_HOSTS", 3, "LINKRANK_OMEGA_HOSTS=3: must be a list of host names"),
        ("LINKRANK_RANK_ALGORITHMS", "pagerank,salsa", "must be one of pagerank, hits, both"),
        ("LINKRANK_HISTORY_WINDOW", -1, "LINKRANK_HISTORY_WINDOW=-1: must be > 0"),
        ("LINKRANK_HISTORY_WINDOW", math.nan, "LINKRANK_HISTORY_WINDOW=nan: must be a number"),
    ],
)
def test_bad_values_are_named(name, value, message):
    with pytest.raises(SettingsError) as e:
        LinkRankSettings({name: value})
    assert message in str(e.value)


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "inf", "nan"])
def test_non_finite_numbers_are_refused_with_the_name(name, value):
    with pytest.raises(SettingsError, match=f"^{name}="):
        LinkRankSettings({name: value})


@pytest.mark.parametrize("name", INTS)
def test_non_finite_integers_are_refused_with_the_name(name):
    for value in (math.inf, math.nan, "inf", 2**64):
        with pytest.raises(SettingsError, match=f"^{name}="):
            LinkRankSettings({name: value})


def test_the_settings_named_in_the_issue_refuse_inf():
    for name in ("LINKRANK_HYBRID_WEIGHT", "LINKRANK_RETRY_DELAY", "LINKRANK_LEASE_TIMEOUT"):
        with pytest.raises(SettingsError, match=f"{name}=inf: must be a finite number"):
            LinkRankSettings({name: math.inf})


def test_combinations():
    with pytest.raises(SettingsError, match="cannot both be 0"):
        LinkRankSettings(INTERNAL_WEIGHT=0, EXTERNAL_WEIGHT="0")
    with pytest.raises(SettingsError, match=r"needs LINKRANK_RANK_ALGORITHMS to include \['hits'\]"):
        LinkRankSettings(POLICY="hits", RANK_ALGORITHMS="pagerank")
    with pytest.raises(SettingsError, match="needs periodic ranking"):
        LinkRankSettings(POLICY="pagerank", RANK_EVERY_PAGES=0, RANK_INTERVAL=0)
    # hybrid-push uses each PageRank that arrives, but needs none.
    assert LinkRankSettings(POLICY="hybrid-push", RANK_ALGORITHMS="none").RANK_ALGORITHMS == ()
    assert LinkRankSettings(POLICY="hybrid-push", RANK_EVERY_PAGES=0, RANK_INTERVAL=0).POLICY == "hybrid-push"
    with pytest.raises(SettingsError, match="needs LINKRANK_OMEGA_HOSTS"):
        LinkRankSettings(OMEGA_POLICY="hosts")
    # Every crawl ranks with both algorithms unless told otherwise.
    for policy in ("fifo", "opic", "hybrid-push"):
        assert LinkRankSettings(POLICY=policy).RANK_ALGORITHMS == ("pagerank", "hits")
    assert LinkRankSettings(RANK_ALGORITHMS=[]).RANK_ALGORITHMS == ()
    assert LinkRankSettings(RANK_ALGORITHMS="pagerank").RANK_ALGORITHMS == ("pagerank",)


def test_overrides_and_copies():
    s = LinkRankSettings({"LINKRANK_DAMPING": 0.5}, DAMPING=0.6, LINKRANK_POLICY="fifo")
    assert (s.DAMPING, s.POLICY) == (0.6, "fifo")
    with pytest.raises(SettingsError, match="unknown setting LINKRANK_DAMPNG"):
        LinkRankSettings(DAMPNG=0.5)
    copy = LinkRankSettings(s)
    assert copy.as_dict() == s.as_dict() and repr(copy) == repr(s)
    assert LinkRankSettings({"LINKRANK_DAMPING": None}).DAMPING == 0.85  # None: the default


# -- unknown names are refused on every path --------------------------------------------------
def test_unknown_name_is_refused_through_frontera(tmp_path):
    path = tmp_path / "db"
    attrs = {"BACKEND": "frontera_linkrank.LinkRankBackend", "LINKRANK_PATH": str(path), "LINKRANK_POLCY": "fifo"}
    with pytest.raises(SettingsError, match="unknown setting LINKRANK_POLCY .*did you mean LINKRANK_POLICY"):
        FrontierManager.from_settings(FronteraSettings(attributes=attrs))
    assert not path.exists()
    with pytest.raises(SettingsError, match="unknown setting LINKRANK_POLCY"):
        LinkRankSettings(FronteraSettings(attributes=attrs))


def test_unknown_name_is_refused_in_a_dict_and_through_scrapy():
    with pytest.raises(SettingsError, match="unknown setting LINKRANK_POLCY"):
        LinkRankSettings({"LINKRANK_POLCY": "fifo"})
    with pytest.raises(SettingsError, match="unknown setting LINKRANK_POLCY"):
        LinkRankSettings(ScrapySettings({"LINKRANK_POLCY": "fifo"}))
    with pytest.raises(SettingsError, match="unknown setting LINKRANK_POLCY"):
        linkrank_settings(ScrapySettings({"LINKRANK_POLCY": "fifo"}))
    # Other settings of the project are not ours to check.
    assert LinkRankSettings({"CONCURRENT_REQUESTS": 8, "BACKEND": "x"}).POLICY == "hybrid-push"


# Settings that cannot work: a misspelt name is ignored otherwise, an infinite
# hybrid weight hands out nothing and an infinite retry delay never retries,
# and neither crawl ends.
CANNOT_WORK = [
    ("LINKRANK_POLCY", "fifo", "unknown setting LINKRANK_POLCY .*did you mean LINKRANK_POLICY"),
    ("LINKRANK_HYBRID_WEIGHT", math.inf, "LINKRANK_HYBRID_WEIGHT=inf: must be a finite number"),
    ("LINKRANK_HYBRID_WEIGHT", "inf", "LINKRANK_HYBRID_WEIGHT='inf': must be a finite number"),
    ("LINKRANK_RETRY_DELAY", math.inf, "LINKRANK_RETRY_DELAY=inf: must be a finite number"),
    ("LINKRANK_RETRY_DELAY", "inf", "LINKRANK_RETRY_DELAY='inf': must be a finite number"),
]


@pytest.mark.parametrize("name, value, message", CANNOT_WORK)
def test_settings_that_cannot_work_are_refused_by_a_frontier_manager(tmp_path, monkeypatch, name, value, message):
    path = tmp_path / "db"
    attrs = {"BACKEND": "frontera_linkrank.LinkRankBackend", "LINKRANK_PATH": str(path), name: value}
    with pytest.raises(SettingsError, match=message):
        FrontierManager.from_settings(FronteraSettings(attributes=attrs))
    # the same in a Frontera settings module (a module of its own per case)
    module = f"frontier_settings_{tmp_path.name}"
    text = "".join(f"{k} = {v!r}\n" for k, v in attrs.items() if k != name)
    (tmp_path / f"{module}.py").write_text(text + f"{name} = {value!r}\n".replace("= inf", "= float('inf')"))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SettingsError, match=message):
        FrontierManager.from_settings(FronteraSettings(module=module))
    assert not path.exists()  # refused before anything is written


@pytest.mark.parametrize("project", ["scheduler", "addon"])
@pytest.mark.parametrize("name", ["LINKRANK_POLCY", "LINKRANK_HYBRID_WEIGHT", "LINKRANK_RETRY_DELAY"])
def test_settings_that_cannot_work_stop_scrapy_crawl(tmp_path, project, name):
    from test_scrapy_setup import error_lines, stock_crawl

    settings = {"LINKRANK_PATH": str(tmp_path / "db"), name: "fifo" if name == "LINKRANK_POLCY" else "inf"}
    out = stock_crawl("http://127.0.0.1:9", project, "stock", "http://a.test/", settings, timeout=60)
    assert out.returncode != 0, out.stderr[-3000:]
    errors = error_lines(out.stderr)
    assert len(errors) == 1 and name in errors[0], errors
    assert out.stderr.count("Traceback (most recent call last)") <= 1
    assert not (tmp_path / "db").exists()


def test_a_frontera_manager_gets_the_validated_values(tmp_path):
    attrs = {"BACKEND": "frontera_linkrank.LinkRankBackend", "LINKRANK_PATH": str(tmp_path / "db"),
             "LINKRANK_SYNC": "false", "LINKRANK_POLICY": "FIFO", "LINKRANK_MAX_RETRIES": "3"}
    m = FrontierManager.from_settings(FronteraSettings(attributes=attrs))
    try:
        s = m.backend.settings
        assert (s.SYNC, s.POLICY, s.MAX_RETRIES) == (False, "fifo", 3)
    finally:
        m.backend.frontier_stop()


# -- choices come from their owners ------------------------------------------------------------
def test_choices_are_the_owners():
    def choices(name):
        return TABLE[name].kind.choices

    assert tuple(choices("LINKRANK_POLICY")) == tuple(POLICIES)
    assert choices("LINKRANK_OMEGA_POLICY") == aopic.OMEGA_POLICIES
    assert choices("LINKRANK_HISTORY_TIME") == aopic.HISTORY_TIMES
    assert choices("LINKRANK_RECRAWL_POLICY") == RECRAWL_POLICIES
    assert choices("LINKRANK_RANK_EDGES") == ranker.EDGE_MODES
    assert choices("LINKRANK_RANK_ALGORITHMS") == ranker.ALGORITHMS


@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_registered_policy_is_accepted_with_the_rankings_it_needs(policy):
    s = LinkRankSettings(POLICY=policy)
    assert s.POLICY == policy and s.RANK_ALGORITHMS == ("pagerank", "hits")
    needed = POLICIES[policy].rankings
    assert LinkRankSettings(POLICY=policy, RANK_ALGORITHMS=needed or "none").RANK_ALGORITHMS == needed
    for other in {("pagerank",), ("hits",), ()} - {needed}:
        if set(needed) - set(other):
            with pytest.raises(SettingsError, match="needs LINKRANK_RANK_ALGORITHMS"):
                LinkRankSettings(POLICY=policy, RANK_ALGORITHMS=other or "none")


# -- constructors take the settings object ---------------------------------------------------
def test_books_and_rank_config_from_settings():
    s = LinkRankSettings(DAMPING=0.7, HISTORY_WINDOW=10, HISTORY_TIME="cash", OMEGA_READ_EVERY=3,
                         EXTERNAL_WEIGHT=2, OMEGA_POLICY="unfetched", RANK_TOLERANCE=1e-6, RANK_EDGES="stream",
                         POLICY="hybrid")
    t = VertexTable()
    t.append(3)
    a = aopic.Aopic.from_settings(t, s)
    assert (a.damping, a.window, a.cash_time, a.omega_read_every, a.policy) == (0.7, 10.0, True, 3, "unfetched")
    assert (a.internal_weight, a.external_weight, a.n_target) == (1.0, 2.0, 3)
    c = ranker.RankConfig.from_settings(s)
    assert (c.algorithms, c.damping, c.tol, c.edges, c.max_iter) == (("pagerank", "hits"), 0.7, 1e-6, "stream", 200)
    # A reader of saved books moves no cash along links: its damping is unknown.
    assert math.isnan(aopic.Aopic.from_saved(t, a.state_dict()).damping)


# -- the generated document --------------------------------------------------------------------
def test_docs_settings_md_is_in_sync():
    with open(os.path.join(ROOT, "docs", "settings.md"), encoding="utf-8") as f:
        text = f.read()
    assert text == markdown_document(), "run: python -m frontera_linkrank.settings --markdown > docs/settings.md"


def test_readme_table_is_in_sync():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    table = markdown_table()
    assert all(f"`{name}`" in table for name in TABLE)
    if BEGIN in text:
        assert readme_block(text) == table, "run: python -m frontera_linkrank.settings --update-readme README.md"
