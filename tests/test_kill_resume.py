"""kill -9 of a crawling process, mid-batch, then reopen and resume."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np

from frontera_linkrank import LinkRankBackend
from frontera_linkrank.scoring.aopic import Aopic
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.vertices import CRAWLED, LEASED

CHILD = os.path.join(os.path.dirname(__file__), "crash_child.py")
N = 3000


def read_progress(path):
    crawled, lines, done = set(), [], False
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break  # torn last line
            if line == "DONE\n":
                done = True
                continue
            rec = json.loads(line)
            crawled.update(rec["crawled"])
            lines.append(rec)
    return crawled, lines, done


def start(db, progress):
    return subprocess.Popen([sys.executable, CHILD, str(db), str(progress), str(N)], stderr=subprocess.PIPE)


def kill_mid_crawl(db, progress, rng, min_lines):
    proc = start(db, progress)
    deadline = time.time() + 60
    while time.time() < deadline:
        if os.path.exists(progress) and len(read_progress(progress)[1]) >= min_lines:
            break
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode())
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.03))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def check_books(db_path, committed_crawled):
    """Read-only: invariant holds; every committed crawl is still there.
    Returns the URLs of pages leased at the time of the kill."""
    with PageDB(db_path, readonly=True) as db:
        a = Aopic.from_saved(db.vertices, db.meta.get("aopic"), db.host_ids)
        assert abs(a.residual()) < 1e-9
        v = db.vertices
        urls = db.urls(range(db.n_pages))
        state = dict(zip(urls, v.state[: db.n_pages].tolist()))
        missing = [u for u in committed_crawled if state.get(u) != CRAWLED]
        assert not missing, f"{len(missing)} pages crawled before the last commit were lost"
        return {u for u, s in state.items() if s == LEASED}


def test_kill_9_mid_batch_then_resume(tmp_path):
    rng = random.Random(1234)
    db, progress = tmp_path / "db", tmp_path / "progress"
    for round_ in range(3):
        kill_mid_crawl(db, progress, rng, min_lines=5 + 10 * round_)
        committed, lines, _ = read_progress(progress)
        leased = check_books(db, committed)
        assert leased, "the kill should leave requests in flight"
        # Reopening as writer offers the leased pages again.
        b = LinkRankBackend(settings={"LINKRANK_PATH": str(db), "LINKRANK_SYNC": False})
        assert b.stats()["leases_recovered"] >= len(leased)
        assert not (b.db.vertices.state[: b.db.n_pages] == LEASED).any()
        queued = np.flatnonzero(b.db.vertices.state[: b.db.n_pages] == 0)
        assert leased <= set(b.db.urls(queued))
        b.frontier_stop()  # nothing handed out: the child resumes from here
    # Let the last run finish: every page of the finite web is crawled once.
    proc = start(db, progress)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()
    crawled, lines, done = read_progress(progress)
    assert done
    with PageDB(db, readonly=True) as db_:
        assert db_.n_pages == N
        assert (db_.vertices.state[:N] == CRAWLED).all()
        assert (db_.vertices.n_crawls[:N] >= 1).all()
        a = Aopic.from_saved(db_.vertices, db_.meta.get("aopic"), db_.host_ids)
        assert abs(a.residual()) < 1e-9
    # Pages fetched twice: only those in flight at a kill.
    handed = [u for rec in lines for u in rec["leased"]]
    twice = len(handed) - len(set(handed))
    assert twice <= 3 * 25
