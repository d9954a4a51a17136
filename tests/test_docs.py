"""The user documentation names only what the code has.

README.md and docs/*.md may mention a ``LINKRANK_*`` setting only if the
settings table has it, state a setting's default only as the table has it,
name a crawl policy only if it is registered, and link only to files and
headings that exist. docs/research/ holds notes on what was tried (removed
settings and policies included), so only its links are checked. The
README stays short: what the project is, how to start, where the rest is.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from frontera_linkrank.recrawl.scheduler import POLICIES as RECRAWL_POLICIES
from frontera_linkrank.scheduling.policies import POLICIES
from frontera_linkrank.scoring.aopic import OMEGA_POLICIES
from frontera_linkrank.settings.table import TABLE

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
USER_DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
ALL_DOCS = [*USER_DOCS, *sorted((ROOT / "docs" / "research").glob("*.md"))]
README_LIMIT = 12 * 1024

SETTING = re.compile(r"(?<![A-Za-z0-9_])LINKRANK_[A-Z0-9_]*[A-Z0-9](?![A-Za-z0-9_*])")
FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.M | re.S)
NAME = r"[a-z][a-z0-9_-]*"
# "`opic` policy", "policy `opic`", "policies `opic`, `hybrid` and `push`"
NAMED_BEFORE = re.compile(rf"`({NAME})`\s+polic(?:y|ies)\b")
NAMED_AFTER = re.compile(rf"\bpolic(?:y|ies):?\s+((?:`{NAME}`(?:,?\s+(?:and|or)\s+|,\s+)?)+)", re.I)
# "the policies keyed by cash (`opic`, `hybrid`, `hybrid-push`)"
NAMED_IN_BRACKETS = re.compile(r"\bpolic(?:y|ies)\b[^.()`]{0,40}\(((?:`[^`]+`[^`)]*)+)\)", re.I)
# LINKRANK_POLICY = "opic", LINKRANK_POLICY=opic, --policy opic, --policies opic push
ASSIGNED = re.compile(rf"""(?<![A-Z_])LINKRANK_POLICY\s*=\s*["']?({NAME})""")
OPTION = re.compile(r"--polic(?:y|ies)((?:[ =]+[a-z][a-z0-9_-]*)+)")
DEFAULT_IN_PROSE = re.compile(
    r"`(LINKRANK_[A-Z0-9_]+)`,? \((?:default )?`?([-+0-9.,e]+%?|'[^']*'|\"[^\"]*\"|True|False|None)`?\)")
# "`hybrid-push` (default)", "`opic`, the default", "the default stays `hybrid`", "default policy, `push`"
DEFAULT_NAMED = re.compile(rf"`({NAME})`(?:\s+\((?:the\s+)?|,\s+the\s+)default\b"
                           rf"|\b[Dd]efault(?:\s+policy)?(?:\s+stays|\s+is|\s+was|,)?\s+`({NAME})`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# A section that shows how to add a policy names one that is, by design, not registered.
EXAMPLE_SECTIONS = {"architecture.md": "## Adding a crawl policy"}


def _read(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    start = EXAMPLE_SECTIONS.get(path.name)
    if start and start in text:
        head, _, rest = text.partition(start)
        nxt = rest.find("\n## ")
        text = head + (rest[nxt:] if nxt >= 0 else "")
    return text


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and HTML comments."""
    return re.sub(r"<!--.*?-->", "", FENCE.sub("", text), flags=re.S)


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- policy names ----------------------------------------------------------------------------------
def policy_mentions(text: str) -> list[tuple[str, bool]]:
    """``(name, strict)`` for every policy name ``text`` mentions: strict
    where only a crawl policy fits (the setting, ``--policy``, a policy
    table), loose in prose, where a recrawl or virtual-page policy fits too."""
    found = [(m.group(1), True) for m in ASSIGNED.finditer(text)]
    found += [(n, True) for m in OPTION.finditer(text) for n in re.split(r"[ =]+", m.group(1)) if n]
    prose = _prose(text)
    found += [(m.group(1), False) for m in NAMED_BEFORE.finditer(prose)]
    for pattern in (NAMED_AFTER, NAMED_IN_BRACKETS):
        for m in pattern.finditer(prose):
            found += [(n, False) for n in re.findall(r"`([^`]+)`", m.group(1)) if re.fullmatch(NAME, n)]
    found += [(n, True) for n in _policy_table_names(prose)]
    return found


def _tables(text: str) -> list[list[list[str]]]:
    """Markdown tables of ``text`` as rows of stripped cells, header first."""
    tables, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif rows:
            tables.append(rows)
            rows = []
    return tables


def _policy_table_names(text: str) -> list[str]:
    """The first backticked name of each row of a crawl-policy table: a
    table whose first column is "policy" and which names a registered policy
    (so the virtual page's target sets, also "policies", are left out)."""
    out = []
    for header, *rows in _tables(text):
        if header[0].lower() != "policy":
            continue
        names = [m.group(1) for r in rows if (m := re.match(rf"`({NAME})`", r[0]))]
        if any(n in POLICIES for n in names):
            out += names
    return out


def default_policy_mentions(text: str) -> list[str]:
    """Names ``text`` calls the default, where they can be crawl policies."""
    other = (set(RECRAWL_POLICIES) | set(OMEGA_POLICIES)) - set(POLICIES)  # `all` (default): ω's target set
    names = [m.group(1) or m.group(2) for m in DEFAULT_NAMED.finditer(_prose(text))]
    return [n for n in names if n not in other]


def test_the_default_policy_the_docs_name_is_the_default():
    default = TABLE["LINKRANK_POLICY"].default
    bad = [f"{_rel(p)}: `{name}`" for p in USER_DOCS for name in default_policy_mentions(_read(p)) if name != default]
    assert not bad, f"the default policy is `{default}`, not:\n" + "\n".join(bad)


def test_policy_names_in_the_docs_are_registered():
    loose = set(POLICIES) | set(RECRAWL_POLICIES) | set(OMEGA_POLICIES)
    bad = [f"{_rel(p)}: `{name}`" for p in USER_DOCS for name, strict in policy_mentions(_read(p))
           if name not in (POLICIES if strict else loose)]
    assert not bad, "policies the code does not have:\n" + "\n".join(bad)


def test_the_policy_checks_see_what_the_docs_write():
    text = """\
LINKRANK_POLICY = "hybrid-push"  and `--set LINKRANK_POLICY=opic`, `--policy push --draws 3`,
`--policies hybrid hits --baselines`. The `score` policy; policy `fifo`; policies `a1`, `b2` and `c3`;
the policies keyed by cash (`d4`, `e5`).

| policy | key |
|---|---|
| `pagerank` | PageRank |
| `f6` (an old one) | ? |

| policy | target set |
|---|---|
| `all` | every page |
"""
    names = {n for n, _ in policy_mentions(text)}
    assert names == {"hybrid-push", "opic", "push", "hybrid", "hits", "score", "fifo", "a1", "b2", "c3", "d4",
                     "e5", "pagerank", "f6"}
    said = ("`push` (default); `hits`, the default; so the default\nstays `hybrid`; the default policy, `opic`;"
            " `all` (default)")
    assert default_policy_mentions(said) == ["push", "hits", "hybrid", "opic"]


# -- settings --------------------------------------------------------------------------------------
def test_settings_in_the_docs_exist():
    bad = [f"{_rel(p)}: {name}" for p in USER_DOCS for name in sorted(set(SETTING.findall(_read(p))))
           if name not in TABLE]
    assert not bad, "settings the table does not have (docs/research/ is the place for removed ones):\n" + "\n".join(
        bad)


def _value(text: str) -> object:
    text = text.strip().strip("`")
    if text.endswith("%"):
        return float(text[:-1].replace(",", "")) / 100
    try:
        return ast.literal_eval(text.replace(",", "") if re.fullmatch(r"[-+0-9.,e]+", text) else text)
    except (ValueError, SyntaxError):
        return text


def stated_defaults(text: str) -> list[tuple[str, str]]:
    """``(setting, default as written)``: rows of tables with a Default
    column, and ``LINKRANK_X`` (value) in prose."""
    out = []
    for header, *rows in _tables(text):
        lowered = [h.lower() for h in header]
        if "default" in lowered and "setting" in lowered:
            i, j = lowered.index("setting"), lowered.index("default")
            out += [(m.group(0), r[j]) for r in rows if (m := SETTING.search(r[i]))]
    out += [(m.group(1), m.group(2)) for m in DEFAULT_IN_PROSE.finditer(_prose(text))]
    return out


def _same(setting: str, written: str) -> bool:
    s = TABLE[setting]
    if written == s.show_default() or written.strip("`") == s.shown:
        return True
    value = _value(written)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(s.default, (int, float)):
        return abs(value - s.default) <= 1e-12 * max(1.0, abs(s.default))
    return value == s.default


def test_defaults_the_docs_state_are_the_tables():
    bad = [f"{_rel(p)}: {name} {written}, the table says {TABLE[name].show_default()}"
           for p in USER_DOCS for name, written in stated_defaults(_read(p))
           if name in TABLE and not _same(name, written)]
    assert not bad, "\n".join(bad)


def test_the_default_checks_see_what_the_docs_write():
    text = """\
| Setting | Default | What it does |
|---|---|---|
| `LINKRANK_POLICY` | `'opic'` | order |
| `LINKRANK_MAX_PAGES` | `0` | budget |

`LINKRANK_RANK_GROWTH` (10%), `LINKRANK_RANK_EVERY_PAGES` (1,000), `LINKRANK_HYBRID_WEIGHT` (65),
`LINKRANK_MAX_REQUESTS_PER_HOST` (16 in this mode).
"""
    found = stated_defaults(text)
    assert found == [("LINKRANK_POLICY", "`'opic'`"), ("LINKRANK_MAX_PAGES", "`0`"), ("LINKRANK_RANK_GROWTH", "10%"),
                     ("LINKRANK_RANK_EVERY_PAGES", "1,000"), ("LINKRANK_HYBRID_WEIGHT", "65")]
    assert [_same(*f) for f in found] == [False, True, True, True, False]


# -- size and links --------------------------------------------------------------------------------
def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes; move detail into docs/ (at most {README_LIMIT:,})"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading (before numbering duplicates)."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of ``path``'s headings, duplicates numbered as GitHub does."""
    seen: Counter[str] = Counter()
    out = set()
    for m in re.finditer(r"^#{1,6} (.+?)\s*#*$", FENCE.sub("", path.read_text(encoding="utf-8")), re.M):
        s = slug(m.group(1))
        out.add(s if not seen[s] else f"{s}-{seen[s]}")
        seen[s] += 1
    return out


def broken_links(path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", _prose(path.read_text(encoding="utf-8")))
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{_rel(path)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{_rel(path)}: {target} (no such heading)")
    return bad


@pytest.mark.parametrize("path", ALL_DOCS, ids=_rel)
def test_relative_links_resolve(path):
    bad = broken_links(path)
    assert not bad, "\n".join(bad)


def test_slugs_follow_github():
    assert slug("6. Measuring a crawl order: the simulator's metrics") == (
        "6-measuring-a-crawl-order-the-simulators-metrics")
    assert slug("7.2 `hybrid-push`: cash plus the push estimate") == "72-hybrid-push-cash-plus-the-push-estimate"
    assert slug("Crawl ordering on uk-2007-05@100000, per draw") == "crawl-ordering-on-uk-2007-05100000-per-draw"
    assert slug("1.4 Spreading ω's cash") == "14-spreading-ωs-cash"
