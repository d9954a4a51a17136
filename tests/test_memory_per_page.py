"""Memory per known page: the frontier's resident memory grows by at most
:data:`BUDGET` bytes for every page it learns.

``benchmarks/scale.py`` drives a frontier core in a process of its own (a
crawler's loop: batches of 512 requests, each page reported fetched with
its 10 links, on a synthetic broad web where every page has 5 new pages
and about 1% of the new pages are on new hosts) and reads the process's
memory from /proc when the frontier knows :data:`FIRST` and :data:`LAST`
pages. The web is computed from page numbers: the process holds no memory
per page but the frontier's.

The figure is the **marginal anonymous RSS** per page added between the
two points. Anonymous, because LMDB maps the database file: the pages of
the map the frontier has read count in RSS as file-backed pages, the page
cache of the database, which the kernel drops when memory is short; how
many stay depends on the machine's free memory, not on the frontier (the
file-backed figure is in the failure message). Marginal, because the
interpreter, the libraries and the database's fixed structures are paid
once.

:data:`FIRST` to :data:`LAST` spans a factor of 3, as 0.5M to 1.5M pages
would: a structure that grows by doubling doubles once or twice in the
range, at a third of the run time. Rankings run inline
(``LINKRANK_RANK_BACKGROUND=False``) so that none is in flight at a
checkpoint; fsync is off (memory does not depend on it). Nothing here depends on the machine's speed.
"""

import json
import os
import subprocess
import sys

import pytest

BENCHMARK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "scale.py")
BUDGET = 192  # bytes of anonymous RSS per known page added: what the frontier keeps today, with room
TARGET = 64  # bytes: the goal, not reached yet (docs/memory.md: where the bytes go)
FIRST, LAST = 200_000, 600_000
BATCH = 512


@pytest.fixture(scope="module")
def scale_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("scale")
    out = work / "scale.json"
    done = subprocess.run(
        [sys.executable, BENCHMARK, "--pages", str(LAST), "--checkpoints", str(FIRST), str(LAST),
         "--batch", str(BATCH), "--set", "LINKRANK_SYNC=False", "--set", "LINKRANK_RANK_BACKGROUND=False",
         "--no-reopen", "--dir", str(work / "crawl"), "--json", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_the_benchmark_crawls_the_web_it_describes(scale_run):
    """The frontier knew exactly the pages the web predicts (5 new pages a
    page crawled), at the first batch past each checkpoint, and about 1%
    of the pages added were on new hosts."""
    first, last = scale_run["checkpoints"]
    for row, point in ((first, FIRST), (last, LAST)):
        assert row["known"] == row["predicted_known"] == 1 + 5 * row["crawled"]
        assert point <= row["known"] < point + 5 * BATCH
    new_hosts = (last["hosts"] - first["hosts"]) / (last["known"] - first["known"])
    assert 0.008 < new_hosts < 0.015
    assert last["disk"] > first["disk"] > 0


def _failure(first, last, limit):
    return (
        f"{last['marginal_anon']:.0f} bytes of anonymous RSS per known page added from {first['known']:,} to "
        f"{last['known']:,} known pages (limit {limit}); file-backed (LMDB's map) {last['marginal_file']:.0f} B/page, "
        f"RSS in all {last['marginal_rss']:.0f} B/page; at {last['known']:,} pages "
        f"{last['rss_per_page']:.0f} B/page of RSS, {last['anon_per_page']:.0f} anonymous"
    )


def test_marginal_memory_per_known_page(scale_run):
    """No Python object per waiting page: the frontier's own memory grows by
    a few numpy slots per page (a frontier keeping a dict entry and a queue
    entry per page grows by 600-700 bytes)."""
    first, last = scale_run["checkpoints"]
    assert last["marginal_anon"] <= BUDGET, _failure(first, last, BUDGET)


@pytest.mark.xfail(
    strict=True,
    reason="the frontier holds 80-130 bytes of anonymous RSS per page added from 0.2M to 0.6M known pages (about "
    "40 of them free memory glibc's heap keeps: 84 with its mmap threshold fixed, docs/memory.md); by tracemalloc: "
    "the hot fields (28), the push estimate (residual and row slot of every page, 4 bytes a link: about 21), the "
    "queue's heads and hosts (about 4)",
)
def test_marginal_memory_per_known_page_reaches_the_target(scale_run):
    first, last = scale_run["checkpoints"]
    assert last["marginal_anon"] <= TARGET, _failure(first, last, TARGET)


def test_a_resumed_run_goes_on_where_the_database_stands(tmp_path):
    """``--resume`` continues a closed crawl: the pages it knew, no seed
    again, the earlier checkpoints kept in the JSON, and the database checks
    whole at the end."""
    out = tmp_path / "scale.json"
    common = ["--set", "LINKRANK_SYNC=False", "--dir", str(tmp_path / "crawl"), "--json", str(out)]
    for pages, point, extra in ((20_001, 10_001, ["--no-reopen"]), (40_001, 30_001, ["--resume"])):
        done = subprocess.run([sys.executable, BENCHMARK, "--pages", str(pages), "--checkpoints", str(point),
                               *common, *extra], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        if "--resume" not in extra:
            closed = json.loads(out.read_text())["checkpoints"][-1]
    result = json.loads(out.read_text())
    rows = result["checkpoints"]
    assert [r["checkpoint"] for r in rows] == [10_001, 20_001, 30_001, 40_001]
    assert all(r["known"] == r["predicted_known"] == 1 + 5 * r["crawled"] for r in rows)
    assert rows[1] == closed and result["resumed"]["known"] == closed["known"]
    assert rows[2]["crawled"] > closed["crawled"]
    assert result["check_status"] == 0, result["check_output"]
