"""The real graphs: Hollins and polblogs in frontera_linkrank/data (installed),
uk2007 and ukwa in the repository's datasets/ folder. Their loaders, their
provenance notes, and the built wheel: it holds the small graphs (so that
``simulate hollins`` and ``serve-web hollins`` work from a plain ``pip
install``), not the big ones (naming one there is one clear error line), and
stays small."""

import hashlib
import http.client
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from urllib.parse import urlsplit

import numpy as np
import pytest

import frontera_linkrank
from frontera_linkrank import data
from frontera_linkrank.simulation.datasets import NAMED, load_graph
from frontera_linkrank.storage.urls import check_url

PACKAGE = os.path.dirname(frontera_linkrank.__file__)
ROOT = os.path.dirname(PACKAGE)
DATA = os.path.join(PACKAGE, "data")
DATASETS = os.path.join(ROOT, "datasets")
#: The largest wheel accepted, in bytes.
MAX_WHEEL = 3_000_000


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shipped_files():
    """Data files under frontera_linkrank/data, relative to it (no Python)."""
    out = []
    for name in data.NAMES:
        for f in sorted(os.listdir(os.path.join(DATA, name))):
            out.append(f"{name}/{f}")
    return out


def data_folders():
    """Every real graph's folder: installed ones, then the repository's."""
    return [os.path.join(DATA, n) for n in data.NAMES] + [os.path.join(DATASETS, n) for n in data.REPOSITORY_NAMES]


def edges_of(g):
    src = np.repeat(np.arange(g.n), np.diff(g.indptr))
    return set(zip(src.tolist(), g.indices.tolist()))


def test_every_named_graph_loads():
    sizes = {"hollins": (6012, 23875), "uk2007": (100_000, 3_050_615), "ukwa": (58_842, 184_433),
             "polblogs": (1490, 19_025)}  # fmt: skip
    assert sorted(NAMED) == sorted(sizes)
    for name, (n, m) in sizes.items():
        g = load_graph(name)
        assert (g.n, g.n_edges) == (n, m), name
        assert len(g.urls) == n and len(g.hosts) == n


def test_data_path_finds_each_graph_and_refuses_unknown_names(monkeypatch, tmp_path):
    assert data.path("hollins") == os.path.join(DATA, "hollins")
    assert sorted(os.listdir(DATASETS)) == sorted([*data.REPOSITORY_NAMES, "README.md"])
    with pytest.raises(FileNotFoundError, match="not among the data of frontera_linkrank"):
        data.path("no-such-graph")
    # The repository's graphs: from the folder the variable names, else from
    # datasets/ beside the package (this checkout), whatever the directory.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(data.ENV, DATASETS)
    assert data.path("ukwa-1996-hosts") == os.path.join(DATASETS, "ukwa-1996-hosts")
    monkeypatch.delenv(data.ENV)
    assert os.path.samefile(data.path("uk-2007-05-100000"), os.path.join(DATASETS, "uk-2007-05-100000"))
    monkeypatch.setenv(data.ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError) as e:
        data.path("ukwa-1996-hosts", "1996-uk-web-hosts.tsv.gz")
    assert str(e.value) == (f"ukwa-1996-hosts/1996-uk-web-hosts.tsv.gz: not found in {data.ENV}={tmp_path}; it is in "
                            "the datasets/ folder of the frontera_linkrank source repository: run from a checkout, "
                            f"set {data.ENV} to that folder, or pass the file's path")


def test_polblogs_is_directed_with_blog_hosts_and_party_labels():
    g = load_graph("polblogs")
    # The first node of the GML file and its label as URL.
    assert g.urls[0] == "http://100monkeystyping.com/"
    assert g.urls[1] == "http://12thharmonic.com/wordpress/"
    # Hosts are the blogs' host names: blogs on one host share a number.
    names = [urlsplit(u).hostname for u in g.urls]
    assert len(set(names)) == int(g.hosts.max()) + 1 == 1451
    assert len(set(zip(names, g.hosts.tolist()))) == 1451  # one number per host name
    assert np.bincount(g.party).tolist() == [758, 732]
    # Every blog is a page a frontier accepts (one label ends with a space: stripped).
    assert len({check_url(u) for u in g.urls}) == 1451
    # Arcs keep their direction (the header's "undirected" is not obeyed):
    # many links are not returned, and 19,090 records hold 19,025 arcs.
    arcs = edges_of(g)
    one_way = [(a, b) for a, b in arcs if (b, a) not in arcs]
    assert len(arcs) == 19_025 and len(one_way) == 14_408
    # The first edge record, "source 267 target 1394" (1-based ids), has no
    # record the other way: 266 -> 1393 only.
    assert (266, 1393) in arcs and (1393, 266) not in arcs
    assert sum(a == b for a, b in arcs) == 3


def test_polblogs_gml_by_path_and_hollins_facts(tmp_path):
    g = load_graph(data.path("polblogs", "polblogs.gml"))
    assert g.name == "polblogs" and g.n == 1490
    h = load_graph("hollins")
    hosts = [urlsplit(u).hostname for u in h.urls]
    assert len(set(hosts)) == 4
    src = np.repeat(np.arange(h.n), np.diff(h.indptr))
    assert sum(hosts[a] != hosts[b] for a, b in zip(src.tolist(), h.indices.tolist())) == 918
    assert int((np.diff(h.indptr) == 0).sum()) == 3189


def test_each_data_folder_has_a_readme_with_the_sha256_of_its_files():
    for folder in data_folders():
        name = os.path.basename(folder)
        with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        listed = dict(re.findall(r"^- `([^`]+)` ([0-9a-f]{64})$", readme, re.MULTILINE))
        files = [f for f in os.listdir(folder) if f not in ("README.md", "ATTRIBUTION.md")]
        assert sorted(listed) == sorted(files), name
        for f, digest in listed.items():
            assert sha256(os.path.join(folder, f)) == digest, f"{name}/{f}"
        for word in ("Provenance", "Licence", "commit"):
            assert word in readme, (name, word)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel built offline from a copy of the project's sources."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for f in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(ROOT, f), src / f)
    shutil.copytree(PACKAGE, src / "frontera_linkrank",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.mdb"))
    out = work / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(out)],
                          check=False, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("frontera_linkrank-*.whl")
    return whl


def test_the_wheel_holds_the_small_graphs_unchanged_and_nothing_big(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for rel in shipped_files():
            member = f"frontera_linkrank/data/{rel}"
            assert member in names, member
            assert hashlib.sha256(z.read(member)).hexdigest() == sha256(os.path.join(DATA, rel)), member
        data_files = {n for n in names if n.startswith("frontera_linkrank/data/") and not n.endswith(".py")}
        assert data_files == {f"frontera_linkrank/data/{rel}" for rel in shipped_files()}
        assert sorted(data.NAMES) == ["hollins", "polblogs"]
        assert "frontera_linkrank/data/__init__.py" in names and "frontera_linkrank/py.typed" in names
        assert "frontera_linkrank/cli/dashboard.html" in names  # serve-status' page: nothing from a CDN
        # Only code and the small graphs: every other file is small.
        big = [(i.filename, i.file_size) for i in z.infolist()
               if i.file_size > 100_000 and not i.filename.startswith("frontera_linkrank/data/")]  # fmt: skip
        assert big == []
        (licence,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert z.read(licence).decode().startswith("BSD 3-Clause License")
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        assert "License-Expression: BSD-3-Clause" in z.read(meta).decode()
    assert os.path.getsize(wheel) <= MAX_WHEEL, os.path.getsize(wheel)


def test_serve_web_hollins_runs_from_the_installed_wheel(wheel, tmp_path):
    """Unpacked as pip installs it, away from the source tree: the named graph
    is found in the installed package and ``serve-web hollins`` serves it."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    env = dict(os.environ, PYTHONPATH=str(site))
    where = subprocess.run([sys.executable, "-c", "import frontera_linkrank.data as d; print(d.path('hollins'))"],
                           cwd=tmp_path, env=env, check=False, capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip() == str(site / "frontera_linkrank" / "data" / "hollins")
    port_file = tmp_path / "port"
    code = ("import sys; from frontera_linkrank.cli.main import main; "
            f"sys.exit(main(['serve-web', 'hollins', '--port-file', {str(port_file)!r}, "
            "'--max-requests', '1', '--timeout', '60']))")  # fmt: skip
    web = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.time() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert web.poll() is None and time.time() < deadline, web.communicate()
            time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", int(port_file.read_text()), timeout=30)
        conn.request("GET", "http://www.hollins.edu/")  # as a proxy: the absolute URI
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        assert resp.status == 200 and b'href="http://www.hollins.edu/' in body
        out, err = web.communicate(timeout=30)
    finally:
        if web.poll() is None:
            web.kill()
            web.wait()
    assert web.returncode == 0, err
    assert "serving hollins: 6,012 pages, 23,875 links" in out


def test_a_graph_not_in_the_wheel_is_one_clear_error_line(wheel, tmp_path):
    """From the installed wheel, away from a checkout and with no
    FRONTERA_LINKRANK_DATASETS: ``simulate uk2007`` says where the graph is,
    in one line, exit status 2; ``--version`` is the wheel's."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    env = {k: v for k, v in os.environ.items() if k != data.ENV}
    env["PYTHONPATH"] = str(site)
    code = "import sys; from frontera_linkrank.cli.main import main; sys.exit(main(sys.argv[1:]))"
    for name, rel in (("uk2007", "uk-2007-05-100000/uk-2007-05@100000.csr.npz"),
                      ("ukwa", "ukwa-1996-hosts/1996-uk-web-hosts.tsv.gz")):  # fmt: skip
        r = subprocess.run([sys.executable, "-c", code, "simulate", name], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        assert r.stderr == (f"frontera-linkrank simulate: error: {rel}: not installed with the package; it is in the "
                            "datasets/ folder of the frontera_linkrank source repository: run from a checkout, set "
                            f"{data.ENV} to that folder, or pass the file's path\n")
    r = subprocess.run([sys.executable, "-c", code, "--version"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert (r.returncode, r.stdout) == (0, f"frontera-linkrank {frontera_linkrank.__version__}\n")
