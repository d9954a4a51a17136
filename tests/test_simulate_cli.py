"""``frontera-linkrank simulate``: inputs, outputs and errors."""

import gzip
import json

import numpy as np
import pytest

from frontera_linkrank.settings.table import TABLE
from frontera_linkrank.simulation.cli import main
from frontera_linkrank.simulation.crawl import LINKRANK, simulate
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.simulation.graphs import power_law_host_graph
from frontera_linkrank.simulation.report import LABELS


def run(argv, capsys):
    assert argv[0] == "simulate"
    code = main(argv[1:])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def npz(tmp_path_factory):
    g = power_law_host_graph(2000, pages_per_host=100, seed=3)
    path = tmp_path_factory.mktemp("g") / "small.npz"
    np.savez(path, indptr=g.indptr, indices=g.indices.astype(np.int32), hosts=g.hosts)
    return str(path), g


FAST = ["--draws", "1", "--seeds", "3", "--estimate-points", "2", "--no-progress"]


def test_json_report_of_a_csr_npz(npz, capsys):
    path, g = npz
    code, out, err = run(["simulate", path, "--policy", "opic", "--policy", "fifo", "--baselines", "bfs,random",
                          "--budget", "0.1", "--fractions", "0.02,0.1", "--json", *FAST], capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["graph"]["pages"] == g.n and rep["graph"]["links"] == g.n_edges
    assert rep["graph"]["hosts"] == len(set(g.hosts.tolist()))
    assert [r["name"] for r in rep["runs"]] == ["opic", "fifo", "bfs", "random", "omniscient"]
    assert rep["budget"] == 200 and rep["fractions"] == [0.02, 0.1]
    by = {r["name"]: r for r in rep["runs"]}
    # LinkRankBackend's fifo is breadth-first in discovery order, like the BFS baseline.
    assert by["fifo"]["draws"][0]["collected"] == pytest.approx(by["bfs"]["draws"][0]["collected"])
    assert by["opic"]["settings"]["LINKRANK_POLICY"] == "opic"
    assert rep["command"].startswith("frontera-linkrank simulate ")


def test_table_json_file_and_politeness(npz, capsys, tmp_path):
    path, _ = npz
    code, out, err = run(["simulate", path, "--baselines", "larger-sites-first", "--budget", "150",
                          "--host-delay", "2", "--concurrency", "4", "--json", str(tmp_path / "r.json"), *FAST],
                         capsys)
    assert code == 0, err
    default = TABLE["LINKRANK_POLICY"].default  # no --policy: the default policy
    assert f"| {LABELS.get(default, default)} |" in out and "| larger sites first |" in out
    assert "| omniscient (true PR*) |" in out
    assert "Simulated crawl time" in out and "2 s between fetches of a host" in out
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["politeness"] == {"delay": 2.0, "concurrency": 4, "per_host": 1}
    for r in rep["runs"]:
        times = r["draws"][0]["time_to"]
        assert all(t is not None and t > 0 for t in times) and times == sorted(times)


@pytest.mark.parametrize("polite", [[], ["--host-delay", "2", "--concurrency", "4"]])
def test_plot_keeps_one_colour_per_run_and_a_legend_in_every_panel(npz, capsys, tmp_path, polite):
    """The PNG is written; its figure (rebuilt from the JSON report the same
    run wrote) gives each run one colour in all four panels, different runs
    different colours, and every panel a legend naming each of its lines."""
    import matplotlib.colors

    from frontera_linkrank.simulation.plot import report_figure

    path, _ = npz
    png, rep = tmp_path / "curves.png", tmp_path / "r.json"
    code, out, err = run(["simulate", path, "--policy", "opic", "--policy", "fifo", "--baselines", "bfs,random",
                          "--budget", "100", "--plot", str(png), "--json", str(rep), *polite, *FAST], capsys)
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads(rep.read_text())
    names = [r["name"] for r in report["runs"]]
    assert names == ["opic", "fifo", "bfs", "random", "omniscient"]
    fig = report_figure(report)
    axes = fig.axes
    assert len(axes) == 4
    colours = {}
    for ax in axes:
        lines = ax.get_lines()
        legend = ax.get_legend()
        assert lines and legend is not None, ax.get_title()
        assert [t.get_text() for t in legend.get_texts()] == [l.get_label() for l in lines], ax.get_title()
        for line in lines:
            colours.setdefault(line.get_gid(), set()).add(matplotlib.colors.to_hex(line.get_color()))
    # Every run is drawn in the PR*, recall and last panels; the estimate
    # panel holds the runs with an estimate (the policies at least).
    for ax in (axes[0], axes[1], axes[3]):
        assert [l.get_gid() for l in ax.get_lines()] == names, ax.get_title()
    assert {"opic", "fifo"} <= {l.get_gid() for l in axes[2].get_lines()}
    assert sorted(colours) == sorted(names)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({c.pop() for c in colours.values()}) == len(names)
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_page_database_and_link_list_inputs(tmp_path, capsys):
    g = power_law_host_graph(600, pages_per_host=60, seed=5)
    order = simulate(g, LINKRANK, [0, 1], 150, workdir=str(tmp_path))
    db = load_graph(str(tmp_path / "db"))
    # The database's graph: every page it knows, links of the crawled ones.
    assert db.n >= 150
    for v in order:
        got = {db.urls[w] for w in db.out(db.index[g.urls[v]]).tolist()}
        assert got == {g.urls[w] for w in g.out(v).tolist()} - {g.urls[v]}
    assert db.n_edges == sum(len(set(g.out(v).tolist()) - {v}) for v in order)
    code, out, err = run(["simulate", str(tmp_path / "db"), "--baselines", "bfs", "--budget", "0.2", *FAST], capsys)
    assert code == 0, err
    assert f"{db.n:,} pages" in out

    links = tmp_path / "links.tsv.gz"
    with gzip.open(links, "wt") as f:
        f.write("# comment\n")
        f.write("http://a.test/\thttp://b.test/x?b=1&a=2\n")
        f.write("http://a.test/\thttp://c.test/\n")
        f.write("http://b.test/x?a=2&b=1\thttp://c.test/\n")  # same page as b.test/x?b=1&a=2
        f.write("http://c.test/\thttp://a.test/\n")
    lg = load_graph(str(links))
    assert lg.n == 3 and lg.n_edges == 4
    code, out, err = run(["simulate", str(links), "--budget", "1.0", "--json", *FAST], capsys)
    assert code == 0, err
    assert all(r["draws"][0]["pages"] == 3 for r in json.loads(out)["runs"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["/no/such/graph.tsv"], "no such file"),
        (["{npz}", "--set", "LINKRANK_DAMPING=2"], "LINKRANK_DAMPING"),
        (["{npz}", "--set", "NO_SUCH_THING=1"], "unknown setting LINKRANK_NO_SUCH_THING"),
        (["{npz}", "--set", "DAMPING"], "expected KEY=VALUE"),
        (["{npz}", "--set", "PATH=/important/crawl_db"], "temporary page database"),
        (["{npz}", "--policy", "nonsense"], "--policy nonsense"),
        (["{npz}", "--baselines", "bfs,magic"], "unknown baseline 'magic'"),
        (["{npz}", "--fractions", "0.1,2"], "--fractions"),
        (["{npz}", "--draws", "0"], "--draws must be >= 1"),
        (["{bad}"], "'indptr' is not a CSR row pointer"),
    ],
)
def test_errors_are_one_clear_line(argv, message, npz, tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    np.savez(bad, indptr=np.array([0, 5]), indices=np.array([0]))
    argv = [a.format(npz=npz[0], bad=bad) for a in argv]
    code, out, err = run(["simulate", *argv, "--no-progress"], capsys)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_frontera_linkrank_simulate_dispatches_here(npz, capsys):
    from frontera_linkrank.cli.main import main as frontera_linkrank

    code = frontera_linkrank(["simulate", npz[0], "--baselines", "none", "--budget", "50", "--json", *FAST])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [r["name"] for r in json.loads(out)["runs"]] == [TABLE["LINKRANK_POLICY"].default, "omniscient"]
    assert frontera_linkrank(["simulate", "/no/such/file"]) == 2
    assert "no such file" in capsys.readouterr().err
