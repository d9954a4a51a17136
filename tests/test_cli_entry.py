"""``frontera-linkrank``: one entry point for every tool, and the ``page_db_*``
names kept. (Each subcommand's output against its script on a crawled
database is in test_cli.py.)"""

import importlib.metadata
import os
import re
import subprocess
import sys

import pytest

from frontera_linkrank.cli.commands import BY_NAME, COMMANDS
from frontera_linkrank.cli.main import main as frontera_linkrank

BIN = os.path.dirname(sys.executable)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def installed(name, *args):
    return subprocess.run([os.path.join(BIN, name), *map(str, args)], capture_output=True, text=True, timeout=120)


def pyproject_scripts():
    """``[project.scripts]`` of pyproject.toml as name -> entry point."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]+)"', section, re.M))


def test_help_lists_every_subcommand():
    r = installed("frontera-linkrank", "--help")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith("usage: frontera-linkrank COMMAND")
    for c in COMMANDS:
        (line,) = [l for l in lines if l.split()[:1] == [c.name]]
        assert c.summary in line and (c.alias is None or c.alias in line), line
    names = {c.name for c in COMMANDS}
    assert names == {"seeds", "dump", "find", "links", "path", "stats", "check", "export", "import", "rank",
                     "serve-web", "top", "simulate", "serve-frontier", "frontier-status", "serve-status"}  # fmt: skip
    assert installed("frontera-linkrank").stdout == r.stdout  # no command: the same help


def test_version_is_the_installed_distributions():
    """``--version`` prints the version pip installed (its metadata), which
    is the package's ``__version__`` (pyproject.toml reads it from there)."""
    import frontera_linkrank

    want = f"frontera-linkrank {importlib.metadata.version('frontera_linkrank')}\n"
    assert importlib.metadata.version("frontera_linkrank") == frontera_linkrank.__version__
    for flag in ("--version", "-V"):
        r = installed("frontera-linkrank", flag)
        assert (r.returncode, r.stdout, r.stderr) == (0, want, "")
    assert 'version = { attr = "frontera_linkrank.__version__" }' in open(os.path.join(ROOT, "pyproject.toml")).read()


@pytest.mark.parametrize("argv", [["nope"], ["--nope"], ["page_db_dump", "info", "x"]])
def test_an_unknown_subcommand_is_one_line_and_exit_2(argv):
    r = installed("frontera-linkrank", *argv)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"frontera-linkrank: error: unknown command {argv[0]!r}")
    assert "frontera-linkrank --help" in r.stderr


def test_the_scripts_are_the_table():
    """pyproject.toml and the installed console scripts: frontera-linkrank,
    and each page_db_* alias pointing at its subcommand's function."""
    scripts = pyproject_scripts()
    want = {"frontera-linkrank": "frontera_linkrank.cli.main:main"}
    want.update({c.alias: c.entry_point for c in COMMANDS if c.alias})
    assert scripts == want
    for name, value in want.items():
        (entry,) = importlib.metadata.entry_points(group="console_scripts", name=name)
        assert entry.value == value, "reinstall: pip install --no-deps -e ."
    for c in COMMANDS:
        if c.alias:
            (entry,) = importlib.metadata.entry_points(group="console_scripts", name=c.alias)
            assert entry.load() is c.load()


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_every_subcommand_has_help_naming_it(name, capsys):
    with pytest.raises(SystemExit) as e:
        frontera_linkrank([name, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: frontera-linkrank {name} ")
    alias = BY_NAME[name].alias
    assert alias is None or alias not in out.split("\n\n", 2)[1]  # the description names the command typed


def test_installed_subcommand_and_script_agree(tmp_path):
    """The installed commands, on a database made by the import both ways."""
    edges = tmp_path / "e.tsv"
    links = [(f"http://h{i % 3}.test/{i}", f"http://h{i * 7 % 20 % 3}.test/{i * 7 % 20}") for i in range(20)]
    edges.write_text("".join(f"{a}\t{b}\n" for a, b in links))
    made = []
    for argv in (["page_db_import"], ["frontera-linkrank", "import"]):
        db = tmp_path / f"db{len(made)}"
        r = installed(*argv, db, edges, "--crawl-time", 1000)
        assert r.returncode == 0, r.stderr
        made.append(db)
    outs = [installed(*argv, "info", db).stdout for argv, db in ((["page_db_dump"], made[0]),
                                                                 (["frontera-linkrank", "dump"], made[1]))]  # fmt: skip
    assert outs[0] == outs[1] and len(outs[0].splitlines()) == 21
    r = [installed(*argv, tmp_path / "missing") for argv in (["page_db_stats"], ["frontera-linkrank", "stats"])]
    assert [x.returncode for x in r] == [2, 2]
    assert r[0].stderr == f"page_db_stats: error: {tmp_path / 'missing'}: no such directory\n"
    assert r[1].stderr == f"frontera-linkrank stats: error: {tmp_path / 'missing'}: no such directory\n"


def test_a_crawl_and_the_tools_that_do_not_rank_start_without_scipy():
    """scipy (a quarter of a second of CPU to import) is loaded by the first
    ranking, not by starting a crawl or a tool that does not rank: the
    Scrapy scheduler, the Frontera backend, the frontier service and every
    subcommand but ``seeds`` (whose extraction is a sparse computation)."""
    entry = ["frontera_linkrank.scrapy", "frontera_linkrank.backend", "frontera_linkrank.service.server",
             *(f"frontera_linkrank.cli.{c.module}" for c in COMMANDS if c.name != "seeds"),
             "frontera_linkrank.cli.seeds"]
    # One process imports them in turn and names the first that loads scipy.
    code = ("import importlib, sys\n"
            "for m in sys.argv[1:]:\n"
            "    importlib.import_module(m)\n"
            "    if 'scipy.sparse' in sys.modules:\n"
            "        print(m)\n"
            "        break\n")
    out = subprocess.run([sys.executable, "-c", code, *entry], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "frontera_linkrank.cli.seeds", (out.stdout, out.stderr)
