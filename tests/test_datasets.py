"""The real graphs shipped in frontera_linkrank/data: their loaders, their
provenance notes, and their place in a built wheel (so that the named
graphs and ``serve-web hollins`` work from a plain ``pip install``)."""

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


def edges_of(g):
    src = np.repeat(np.arange(g.n), np.diff(g.indptr))
    return set(zip(src.tolist(), g.indices.tolist()))


def test_every_named_graph_loads_from_the_package_data():
    sizes = {"hollins": (6012, 23875), "uk2007": (100_000, 3_050_615), "ukwa": (58_842, 184_433),
             "polblogs": (1490, 19_025)}  # fmt: skip
    assert sorted(NAMED) == sorted(sizes)
    for name, (n, m) in sizes.items():
        g = load_graph(name)
        assert (g.n, g.n_edges) == (n, m), name
        assert len(g.urls) == n and len(g.hosts) == n


def test_data_path_is_inside_the_package_and_refuses_unknown_names():
    assert data.path("hollins") == os.path.join(DATA, "hollins")
    with pytest.raises(FileNotFoundError, match="not among the data shipped"):
        data.path("no-such-graph")


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
    for name in data.NAMES:
        folder = os.path.join(DATA, name)
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
    for f in ("pyproject.toml", "README.md"):
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


def test_the_wheel_holds_every_data_file_unchanged(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for rel in shipped_files():
            member = f"frontera_linkrank/data/{rel}"
            assert member in names, member
            assert hashlib.sha256(z.read(member)).hexdigest() == sha256(os.path.join(DATA, rel)), member
        assert "frontera_linkrank/data/__init__.py" in names


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
