"""BestFirstQueue's bulk paths (push_many, rebuild) leave the same state
as pushing each page in turn."""

import numpy as np

from frontera_linkrank.scheduling.queue import BestFirstQueue


def _state(q: BestFirstQueue) -> tuple:
    return q._heaps, tuple(sorted(t) for t in q._tops), q._registered, q.entries


def test_push_many_equals_pushes() -> None:
    rng = np.random.default_rng(3)
    pages = rng.integers(0, 500, 2000)
    hosts = pages % 17
    keys = rng.random(2000).round(2)
    one, many = BestFirstQueue(lambda p, k: True), BestFirstQueue(lambda p, k: True)
    for q in (one, many):
        q.set_host_class(3, 1)
    for p, h, k in zip(pages.tolist(), hosts.tolist(), keys.tolist()):
        one.push(p, h, k)
    many.push_many(pages[:700], hosts[:700], keys[:700])
    many.push_many(pages[700:], hosts[700:], keys[700:])
    assert _state(one) == _state(many)


def test_rebuild_heaps_are_sorted_per_host() -> None:
    rng = np.random.default_rng(4)
    pages = np.arange(1000, dtype=np.int64)
    hosts = rng.integers(0, 40, 1000)
    keys = rng.random(1000).round(1)
    q = BestFirstQueue(lambda p, k: True)
    q.set_host_class(5, 1)
    q.rebuild(pages, hosts, keys)
    assert q.entries == 1000
    for h, heap in q._heaps.items():
        assert heap == sorted((-k, p) for p, hh, k in zip(pages.tolist(), hosts.tolist(), keys.tolist()) if hh == h)
        assert q._registered[h] == heap[0]
    assert {t[2] for t in q._tops[1]} == ({5} & set(q._heaps))
