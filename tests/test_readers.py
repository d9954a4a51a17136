"""A reader killed with -9 while a crawl writes is cleaned up by the writer.

LMDB keeps a slot per reading process; a process killed while it holds a
read transaction leaves its slot behind, and LMDB then cannot reuse any
page that reader's snapshot could see: the file grows with every commit.
The writer frees such slots (``reader_check``) when it opens the database
and before each commit.
"""

import os
import signal
import subprocess
import sys

from frontera.core.models import Request, Response

READER = """
import sys, time
from frontera_linkrank.storage.pagedb import PageDB
db = PageDB(sys.argv[1], readonly=True)  # holds its read transaction until closed
print("ready", flush=True)
time.sleep(300)
"""


def crawl(m, pages):
    """Crawl ``pages`` pages of a synthetic web (5 new links a page)."""
    n = 0
    while n < pages:
        got = m.get_next_requests(20)
        assert got
        for r in got:
            n += 1
            m.page_crawled(Response(r.url, request=r))
            m.links_extracted(r, [Request(f"http://h{(n * 7 + k) % 13}.test/p{n * 5 + k}") for k in range(5)])


def kill9_reader(path):
    """Start a reader process on ``path``, wait until it holds its
    snapshot, kill it with -9; returns its pid."""
    p = subprocess.Popen([sys.executable, "-c", READER, path], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        p.stdout.close()
    return p.pid


def slot_pids(env):
    """Pids of the reader slots LMDB lists (``env.readers()`` text)."""
    lines = env.readers().splitlines()[1:]  # header: "    pid     thread     txnid"
    return {int(line.split()[0]) for line in lines if line.split() and line.split()[0].isdigit()}


def test_a_reader_killed_during_a_crawl_is_cleared_and_the_file_stays_small(make_manager, tmp_path):
    sizes = {}
    for name in ("control", "killed_reader"):
        path = str(tmp_path / name)
        m = make_manager(path=path)
        m.add_seeds([Request("http://h0.test/p0")])
        crawl(m, 20)  # the database exists and has been committed
        if name == "killed_reader":
            pid = kill9_reader(path)
            assert pid in slot_pids(m.backend.db.env)  # LMDB still lists the dead reader
        crawl(m, 2000)
        if name == "killed_reader":
            assert pid not in slot_pids(m.backend.db.env)
        m.stop()
        sizes[name] = os.path.getsize(os.path.join(path, "data.mdb"))
    # Without the check the dead reader's snapshot pins every page: 2.3x here.
    assert sizes["killed_reader"] <= 1.1 * sizes["control"], sizes


def test_a_reader_killed_before_the_crawl_opens_is_cleared_at_open(make_manager, tmp_path):
    path = str(tmp_path / "db")
    m = make_manager(path=path)
    m.add_seeds([Request("http://h0.test/p0")])
    crawl(m, 5)
    m.stop()
    # A live reader keeps the environment open (LMDB only resets the reader
    # table when the first process opens it), another is killed.
    alive = subprocess.Popen([sys.executable, "-c", READER, path], stdout=subprocess.PIPE, text=True)
    try:
        assert alive.stdout.readline().strip() == "ready"
        dead = kill9_reader(path)
        m = make_manager(path=path)
        pids = slot_pids(m.backend.db.env)
        assert dead not in pids and alive.pid in pids
        m.stop()
    finally:
        alive.kill()
        alive.wait(10)
        alive.stdout.close()
