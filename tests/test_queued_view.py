"""``frontera-linkrank top --queued`` lists what the frontier hands out
next, in that order, with each page's priority and policy key; ``dump``
and ``export`` carry the same key and priority; request priorities order
the queue and survive a reopen."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import dataset
from frontera_linkrank.cli.queued import policy_keys, priorities, queued_pages
from frontera_linkrank.core import FrontierCore, OutgoingRequest
from frontera_linkrank.scheduling.priority import PRIORITY_KEY
from frontera_linkrank.settings import LinkRankSettings
from frontera_linkrank.simulation.graphs import load_hollins
from frontera_linkrank.storage.pagedb import PageDB

BIN = os.path.dirname(sys.executable)


def link(url, priority=0):
    meta = {PRIORITY_KEY: priority} if priority else {}
    return OutgoingRequest(url, meta=meta)


def partial_crawl(path, policy, pages=40, every=7):
    """Crawl the Hollins graph through the core to ``pages`` fetched pages,
    every ``every``-th link with priority 3 (and the links of the tenth
    page with priority -1); leave nothing leased."""
    g = load_hollins(dataset("hollins"))
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": path, "LINKRANK_SYNC": False, "LINKRANK_POLICY": policy}))
    core.add_seeds([link(g.urls[0])])
    index = {u: k for k, u in enumerate(g.urls)}
    fetched = 0
    while fetched < pages:
        reqs = core.next_requests(min(10, pages - fetched))
        if not reqs:
            break
        for r in reqs:
            v = index[r.url]
            resp = type("R", (), dict(url=r.url, status_code=200, headers={}, body=b"x", meta=r.meta, request=r))()
            core.page_fetched(resp)
            prio = (lambda k: -1) if fetched == 9 else (lambda k: 3 if k % every == 0 else 0)
            core.links_found(r, [link(g.urls[w], prio(k)) for k, w in enumerate(g.out(v).tolist())])
            fetched += 1
    core.close()
    return g


@pytest.mark.parametrize("policy", ["hybrid-push", "opic", "fifo"])
def test_top_queued_is_the_order_the_frontier_hands_out(tmp_path, policy):
    path = str(tmp_path / "db")
    partial_crawl(path, policy)
    with PageDB(path, readonly=True) as db:
        name, rows = queued_pages(db, 40)
        prio = priorities(db)
    assert name == policy and len(rows) == 40
    assert {p for _, p, _ in rows} >= {3, 0} and -1 in set(prio.tolist())
    assert [p for _, p, _ in rows] == sorted((p for _, p, _ in rows), reverse=True)
    out = subprocess.run([os.path.join(BIN, "frontera-linkrank"), "top", path, "--queued", "-n", "5"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert f"by priority, then {policy} key" in lines[0] and "priority" in lines[1]
    assert [line.split()[-1] for line in lines[2:]] == [u for u, _, _ in rows[:5]]
    # What the frontier itself hands out next, reopened (no per-host cap: the view shows no politeness)
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": path, "LINKRANK_SYNC": False, "LINKRANK_POLICY": policy}))
    try:
        handed = [r.url for r in core.next_requests(40)]
    finally:
        core.close()
    assert handed == [u for u, _, _ in rows]


def test_export_and_dump_carry_the_key_and_priority(tmp_path):
    path = str(tmp_path / "db")
    partial_crawl(path, "opic", pages=100)
    with PageDB(path, readonly=True) as db:
        _, keys = policy_keys(db)
        prio = priorities(db)
    out = tmp_path / "pages.csv"
    subprocess.run([os.path.join(BIN, "page_db_export"), path, str(out)], check=True, capture_output=True)
    rows = list(csv.DictReader(open(out)))
    assert [int(r["priority"]) for r in rows] == prio.tolist()
    assert np.allclose([float(r["key"]) for r in rows], keys)
    dump = subprocess.run([os.path.join(BIN, "page_db_dump"), "info", path, "--sort", "key", "--top", "3"],
                          check=True, capture_output=True, text=True).stdout.splitlines()
    assert dump[0].split()[-2:] == ["priority", "key"]
    assert [float(line.split()[-1]) for line in dump[1:]] == sorted(keys, reverse=True)[:3]
