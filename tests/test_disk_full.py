"""A full disk stops the crawl cleanly, says so once, and a run after space
is freed finishes it.

The disk is real: a tmpfs of a few MiB mounted for the test (the suite runs
as root, as ``make test`` does), most of it taken by a filler file that the
test deletes to "free space". LMDB reports the short write of a full disk
as an I/O error; the page database tells a full disk by the free space left
(``storage.environment.write_error``).
"""

import logging
import os
import subprocess

import pytest
from frontera.core.models import Request, Response

from crawlweb import BIN, TestWebServer, multi_host_graph, reachable, run_crawl, scrapy_stats
from frontera_linkrank.simulation.datasets import load_graph

N = 3000  # pages of the test web: about 2.1 MiB of page database


@pytest.fixture
def small_fs(tmp_path):
    """An 8 MiB tmpfs with all but 1 MiB taken by ``filler``; unmounted after."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True, timeout=30)
    try:
        st = os.statvfs(mnt)
        with open(mnt / "filler", "wb") as f:
            f.write(b"\0" * (st.f_bavail * st.f_frsize - (1 << 20)))
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True, timeout=30)


def url(i):
    return f"http://h{i % 13}.test/{'x' * 150}/p{i}"


def crawl(m):
    """Crawl the test web (page i links to 5i+1..5i+5) until the manager
    stops handing out; returns the pages crawled."""
    done = set()
    while not m.finished:
        got = m.get_next_requests(50)
        if not got:
            break
        for r in got:
            i = int(r.url.rsplit("p", 1)[1])
            done.add(i)
            m.page_crawled(Response(r.url, request=r))
            m.links_extracted(r, [Request(url(j)) for j in range(5 * i + 1, min(5 * i + 6, N))])
    return done


def check(path):
    out = subprocess.run([os.path.join(BIN, "page_db_check"), str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_crawl_stops_once_on_a_full_disk_and_finishes_after(make_manager, small_fs, caplog):
    path = small_fs / "db"
    m = make_manager(path=path, LINKRANK_MAP_SIZE=1 << 20)
    m.add_seeds([Request(url(0))])
    with caplog.at_level(logging.INFO, logger="frontera_linkrank"):
        first = crawl(m)  # raises nothing
        assert m.get_next_requests(50) == [] and m.finished  # stopped: nothing more handed out
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert f"{path}: disk full" in errors[0] and "free some space and run the crawl again" in errors[0], errors
    assert m.backend.stats()["stopped"] == 1 and len(first) < N
    m.stop()  # closes without trying to commit again
    os.remove(small_fs / "filler")
    m = make_manager(path=path, LINKRANK_MAP_SIZE=1 << 20)
    second = crawl(m)
    assert m.finished and m.backend.stats().get("stopped") is None
    m.stop()
    assert first | second == set(range(N))  # every page crawled; only the last batch's twice
    assert len(first & second) <= 50 * 2
    check(path)


def test_page_db_import_says_disk_full_and_a_rerun_after_freeing_space_finishes(small_fs, tmp_path):
    edges = tmp_path / "edges.tsv"
    edges.write_text("".join(f"{url(i)}\t{url(j)}\n" for i in range(N) for j in range(5 * i + 1, min(5 * i + 6, N))))
    path = small_fs / "db"
    cmd = [os.path.join(BIN, "page_db_import"), str(path), str(edges), "--chunk-bytes", "65536", "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"page_db_import: error: {path}: disk full, the page database cannot be written")
    os.remove(small_fs / "filler")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"now holds {N:,} pages, {N - 1:,} links" in out.stderr, out.stderr
    check(path)


def test_scrapy_crawl_stops_once_on_a_full_disk_and_a_rerun_finishes(small_fs, tmp_path):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=6, pages=400, seed=4)
    g = load_graph(npz)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(g.urls[0] + "\n")
    path = small_fs / "db"
    settings = {"LINKRANK_MAP_SIZE": 1 << 20, "LINKRANK_LOG_INTERVAL": 0}
    with TestWebServer(npz, str(tmp_path)) as srv:
        out = run_crawl(srv.proxy, str(path), str(seeds), settings=settings, timeout=240)
        first = srv.page_fetches()
        log = out.stdout
        errors = [line for line in log.splitlines() if " ERROR: " in line]
        assert len(errors) == 1 and f"{path}: disk full" in errors[0], errors or log[-3000:]
        assert "Traceback" not in log and scrapy_stats(log)["finish_reason"] == "linkrank_stopped", log[-3000:]
        assert len(first) < g.n
        os.remove(small_fs / "filler")
        out = run_crawl(srv.proxy, str(path), str(seeds), settings=settings, timeout=240)
        assert out.returncode == 0 and scrapy_stats(out.stdout)["finish_reason"] == "finished", out.stdout[-3000:]
        fetches = srv.page_fetches()
    assert set(fetches) == {g.urls[v] for v in reachable(g, 0)}
    # Fetched twice: only what the stopped run had fetched since its last commit.
    assert sum(fetches.values()) - len(fetches) <= 2 * 16 + 64, sum(fetches.values()) - len(fetches)
    check(path)
