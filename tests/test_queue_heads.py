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
    rng = np.random.default_rng(seed)
    table = VertexTable()
    keys = np.zeros(0)
    lists = Lists()
    front = Frontier(table, lambda idx: keys[idx], lists=lists)
    queued = set()
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
        elif op < 0.7:  # keys fall: the policy asks for a rebuild
            keys = keys * rng.random(len(keys)).round(1)
            front.rebuild(eager=bool(rng.integers(2)))  # heads filled now, or as hosts come up
        else:
            n = int(rng.integers(1, 25))
            skipped = set(rng.choice(n_hosts, int(rng.integers(0, 4)), replace=False).tolist())
            cap = int(rng.integers(0, 4))
            skip = skipped.__contains__
            want = reference_take(keys, queued, table.host, n, skip, cap)
            got = front.take(n, skip_host=skip, max_per_host=cap)
            assert got == want, step
            for p in got:
                table.state[p] = CRAWLED
                queued.discard(p)
        assert front.n_queued == len(queued)
        # Memory: never more than twice the largest head per host.
        heads = {}
        for p in front.queue.live:
            heads[int(table.host[p])] = heads.get(int(table.host[p]), 0) + 1
        assert max(heads.values(), default=0) <= 2 * max(head[1], head[3])
    assert front.queue.refills > 0


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
    assert len(front.queue.live) <= 2 * queue_module.HEAD_MAX
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
    assert len(front.queue.live) <= 2 * n // 8
