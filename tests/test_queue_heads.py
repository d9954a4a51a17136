"""The best-first queue with bounded heads per host hands out exactly what
a plain best-first order over every waiting page does.

A reference keeps every waiting page with its key and takes the best
(ties: the page found first), within the same skip and per-host rules;
the frontier under test keeps at most a few entries per host in memory
(tiny head sizes here, so refills, trims and floors are exercised at
every step) while pages arrive, keys rise, batches are taken with hosts
skipped and capped, pages leave outside the queue, and the queue is
rebuilt after keys fall.
"""

import numpy as np
import pytest

from frontera_linkrank.scheduling import frontier as frontier_module
from frontera_linkrank.scheduling import queue as queue_module
from frontera_linkrank.scheduling.frontier import Frontier
from frontera_linkrank.storage.vertices import CRAWLED, UNFETCHED, VertexTable


class Lists:
    """Host page lists as the page database keeps them (every page listed once)."""

    def __init__(self):
        self.lists = {}
        self.replaced = 0

    def add(self, host, page):
        self.lists.setdefault(host, []).append(page)

    def pages_of(self, host):
        return np.asarray(self.lists.get(host, []), np.int64)

    def replace_pages(self, host, pages):
        self.lists[host] = list(np.asarray(pages).tolist())
        self.replaced += 1


def reference_take(keys, queued, hosts, n, skip, cap):
    order = sorted((-keys[p], p) for p in queued)
    out, counts = [], {}
    for _, p in order:
        h = int(hosts[p])
        if skip(h) or (cap and counts.get(h, 0) >= cap):
            continue
        out.append(p)
        counts[h] = counts.get(h, 0) + 1
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("head", [(1, 2, 64, 2), (2, 3, 64, 3), (1, 2, 2, 6), (4, 256, 64, 1 << 14)])
def test_bounded_heads_take_what_a_plain_best_first_order_takes(monkeypatch, seed, head):
    monkeypatch.setattr(queue_module, "HEAD_MIN", head[0])
    monkeypatch.setattr(queue_module, "HEAD_MAX", head[1])
    monkeypatch.setattr(queue_module, "READ_BACK", head[2])  # (1, 2, 2, 6): heads of half the waiting pages
    monkeypatch.setattr(queue_module, "HEAD_CAP", head[3])
    monkeypatch.setattr(frontier_module, "KEYS_AT_ONCE", 7)  # a rebuild computes its keys in slices
    monkeypatch.setattr(queue_module, "PARK_CHUNK", 1 + seed % 3)  # a rebuild's hosts join the heap 1-3 at a time
    rng = np.random.default_rng(seed)
    table = VertexTable()
    keys = np.zeros(0)
    lists = Lists()
    front = Frontier(table, lambda idx: keys[idx], lists=lists)
    queued = set()
    extras = False
    n_hosts = 12
    for step in range(120):
        op = rng.random()
        if op < 0.35:  # new pages, keys drawn from few values (ties)
            k = int(rng.integers(1, 30))
            start = table.append(k)
            table.host[start : start + k] = rng.zipf(1.5, k) % n_hosts
            keys = np.concatenate((keys, rng.integers(0, 20, k).astype(np.float64)))
            for p in range(start, start + k):
                lists.add(int(table.host[p]), p)
            front.offer(np.arange(start, start + k))
            queued.update(range(start, start + k))
        elif op < 0.6 and queued:  # keys of waiting pages rise
            some = rng.choice(sorted(queued), min(len(queued), 15), replace=False)
            keys[some] += rng.integers(0, 6, len(some))
            front.offer(some)
        elif op < 0.65 and queued:  # a page leaves outside the queue (fetched without being handed out)
            p = int(rng.choice(sorted(queued)))
            table.state[p] = CRAWLED
            front.discard(p)
            queued.discard(p)
        elif op < 0.7:  # keys fall: the policy asks for a rebuild; or a reopening, with the heads of a close
            keys = keys * rng.random(len(keys)).round(1)
            mode = int(rng.integers(4))
            # Heads filled now, or as hosts come up, or holding the pages of the heads before (mode 2), and
            # others (mode 3: any pages, taken ones too, as stored heads of an older close may name).
            heads = front.head_pages() if mode >= 2 else None
            if mode == 3:
                heads = np.r_[heads, rng.integers(0, len(keys) + 5, 10)]
            front.rebuild(eager=mode == 0, heads=heads)
            extras = mode == 3 or (mode == 2 and extras)  # mode 2 keeps what mode 3 put in the heads
        else:
            n = int(rng.integers(1, 25))
            skipped = set(rng.choice(n_hosts, int(rng.integers(0, 4)), replace=False).tolist())
            cap = int(rng.integers(0, 4))
            skip = skipped.__contains__
            want = reference_take(keys, queued, table.host, n, skip, cap)
            # A look ahead (the status view) sees the same order and changes nothing.
            ahead = [p for p, _ in front.peek(n)]
            assert ahead == reference_take(keys, queued, table.host, n, lambda h: False, 0), step
            got = front.take(n, skip_host=skip, max_per_host=cap)
            assert got == want, step
            for p in got:
                table.state[p] = CRAWLED
                queued.discard(p)
        assert front.n_queued == len(queued)
        # Memory: never more than twice the largest head per host (heads given with pages of
        # other hosts' heads may hold more until the next rebuild).
        heads = {}
        for p in front.queue.head_pages().tolist():
            heads[int(table.host[p])] = heads.get(int(table.host[p]), 0) + 1
        assert extras or max(heads.values(), default=0) <= 2 * max(head[1], head[3])
    assert front.queue.refills > 0 or head[1] >= 256  # small heads: refills exercised


def one_host(n, seed):
    """``n`` waiting pages of one host, listed, with random keys."""
    table = VertexTable()
    table.append(n)
    table.host[:n] = 0
    keys = np.random.default_rng(seed).random(n)
    lists = Lists()
    for p in range(n):
        lists.add(0, p)
    return table, keys, lists


def test_a_host_with_many_waiting_pages_holds_a_small_head_and_compacts_its_list():
    n = 20_000
    table, keys, lists = one_host(n, 1)
    front = Frontier(table, lambda idx: keys[idx], lists=lists)
    front.rebuild(eager=False)
    taken = []
    for _ in range(40):
        got = front.take(300)
        taken += got
        table.state[np.asarray(got)] = CRAWLED
    assert taken == np.argsort(-keys, kind="stable")[: len(taken)].tolist()
    assert len(front.queue.head_pages()) <= 2 * queue_module.HEAD_MAX
    assert lists.replaced >= 1 and len(lists.lists[0]) < n  # crawled pages left the list
    assert (table.state[lists.pages_of(0)] == UNFETCHED).all() or front.n_queued + len(taken) == n


def test_a_large_hosts_refills_read_back_a_bounded_number_of_pages_per_page_handed_out(monkeypatch):
    monkeypatch.setattr(queue_module, "HEAD_MAX", 8)
    monkeypatch.setattr(queue_module, "READ_BACK", 8)  # hosts past 64 waiting pages are "large"
    n = 20_000
    table, keys, lists = one_host(n, 2)
    read = []
    pages_of = lists.pages_of
    lists.pages_of = lambda host: read.append(len(pages_of(host))) or pages_of(host)
    front = Frontier(table, lambda idx: keys[idx], lists=lists)
    front.rebuild(eager=False)
    taken = []
    while len(taken) < n // 2:
        got = front.take(100)
        taken += got
        table.state[np.asarray(got)] = CRAWLED
    assert taken == np.argsort(-keys, kind="stable")[: len(taken)].tolist()
    # One in READ_BACK of the waiting pages joins the head at each refill:
    # about READ_BACK pages read per page handed out (the square root, 141,
    # capped at HEAD_MAX, would read a thousand times more).
    assert sum(read) <= 2 * 8 * len(taken)
    assert len(front.queue.head_pages()) <= 2 * n // 8


def test_a_reopened_crawl_hands_out_from_the_heads_it_closed_with(tmp_path):
    """A closing crawl stores its heads; the next open puts them back, so
    its first batch reads no host's list, and is the batch an open that
    reads them hands out."""
    import shutil

    from crawlweb import multi_host_graph
    from frontera_linkrank.core.frontier_core import FrontierCore
    from frontera_linkrank.settings import LinkRankSettings
    from frontera_linkrank.simulation.crawl import LINKRANK, crawl
    from frontera_linkrank.simulation.datasets import load_graph
    from frontera_linkrank.storage.pagedb import PageDB

    g = load_graph(multi_host_graph(str(tmp_path / "web.npz"), hosts=6, pages=2000, seed=3))
    crawl(g, LINKRANK, [0], 1500, batch=100, workdir=str(tmp_path))
    settings = LinkRankSettings({"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False})
    core = FrontierCore(settings)
    core.next_requests(30)  # closed with requests out: the next open offers them again
    core.close()
    shutil.copytree(tmp_path / "db", tmp_path / "plain")
    with PageDB(tmp_path / "plain") as db:
        stored = db.stored_heads()
        assert len(stored) > 6  # several pages of each host's head
        db.store_heads(np.zeros(0, np.int64))  # this copy opens as one stored without heads

    def first_batch(path):
        core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": str(path), "LINKRANK_SYNC": False}))
        try:
            held = sorted(core.frontier.head_pages().tolist())
            return core.next_requests(60), core.frontier.queue.refills, held
        finally:
            core.ranking.cancel()
            core.db.close()

    got, refills, held = first_batch(tmp_path / "db")
    want, plain_refills, plain_held = first_batch(tmp_path / "plain")
    assert [r.url for r in got] == [r.url for r in want] and len(got) == 60
    assert refills == 0 and plain_refills > 0 and not plain_held
    assert set(stored.tolist()) <= set(held) and len(held) >= len(stored) + 30  # and the 30 leased


def test_a_rebuilt_queue_holds_few_bytes_per_host_until_a_host_is_touched():
    """A rebuild gives every host a head, but a crawl touches few hosts
    before the next one: the heads stay packed in arrays until then, so a
    broad crawl's many hosts cost a few hundred bytes each (tracemalloc:
    everything the queue allocates), and unpacking gives the same order."""
    import tracemalloc

    from frontera_linkrank.scheduling.queue import BestFirstQueue

    hosts_n, per_host = 20_000, 4  # every page in its host's head: nothing to refill
    hosts = np.repeat(np.arange(hosts_n), per_host)
    pages = np.arange(hosts_n * per_host)
    keys = np.random.default_rng(3).integers(0, 50, len(pages)).astype(np.float64)  # ties
    queue = BestFirstQueue(lambda host: (np.zeros(0, np.int64), np.zeros(0)))
    tracemalloc.start()
    try:
        queue.rebuild_heads(pages, hosts, keys)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held / hosts_n < 400  # Python heaps of tuples and a dict entry per page: about 1,100 bytes a host
    assert len(queue) == len(pages) and sorted(queue.head_pages().tolist()) == pages.tolist()
    touched = np.array([7, 7, 19_999])  # pages of hosts 1 and 4,999
    assert queue.queued_keys(touched, touched // per_host).tolist() == keys[touched].tolist()
    assert queue.pop_batch(len(pages)) == np.lexsort((pages, -keys)).tolist()
