"""The numpy helpers against the numpy calls they replace."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from frontera_linkrank.numeric import at_least, best_first, top_k, unique

values = st.lists(st.sampled_from([-np.inf, -1.0, 0.0, 0.5, 1.0, 2.0, np.inf]) | st.floats(-10, 10), max_size=60)


@given(values, st.integers(-2, 70), st.integers(1, 70))
def test_top_k_is_the_head_of_a_stable_descending_argsort(xs, k, chunk):
    x = np.array(xs, dtype=float)
    assert top_k(x, k, chunk).tolist() == np.argsort(-x, kind="stable")[: max(k, 0)].tolist()


@given(values, st.integers(-2, 70), st.lists(st.integers(0, 59), max_size=20), st.integers(1, 70))
def test_top_k_ranks_nan_as_minus_infinity(xs, k, holes, chunk):
    x = np.array(xs, dtype=float)
    x[[h for h in holes if h < len(x)]] = np.nan
    filled = np.where(np.isnan(x), -np.inf, x)
    assert top_k(x, k, chunk).tolist() == np.argsort(-filled, kind="stable")[: max(k, 0)].tolist()


@given(st.lists(st.integers(-5, 5), max_size=50))
def test_unique_is_numpys(xs):
    assert unique(np.array(xs, dtype=np.int64)).tolist() == np.unique(np.array(xs, dtype=np.int64)).tolist()


@given(st.integers(1, 300), st.integers(1, 40), st.integers(0, 60), st.randoms(use_true_random=False))
def test_best_first_is_the_head_of_the_heaps_order(n, m, nan_step, rnd):
    """Key highest first, ties by smaller id (a host's head and its floor),
    with ties, signed zeros, infinities and NaN; both the partitioned and
    the plain path (``m`` small or not against the entries)."""
    pool = [-np.inf, -0.0, 0.0, 0.5, 1.0, np.inf, rnd.uniform(-10, 10), rnd.uniform(-10, 10)]
    keys = np.array([rnd.choice(pool) if rnd.random() < 0.5 else rnd.uniform(-10, 10) for _ in range(n)])
    if nan_step:
        keys[::nan_step] = np.nan
    ids = np.array(rnd.sample(range(10 * n), n), dtype=np.int64)
    m = min(m, n)
    assert best_first(keys, ids, m).tolist() == np.lexsort((ids, -keys))[:m].tolist()


def _anon_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:"))


def test_at_least_grows_without_touching_the_room_it_adds():
    """A per-page array doubles as pages arrive: the new half, zero until
    pages fill it, is left to the kernel's zero pages, so resident memory
    follows the pages held, not the capacity (a filled half would cost a
    crawl up to twice its arrays' memory)."""
    a = np.ones(1 << 23)  # 64 MiB: above glibc's largest mmap threshold, so the grown array is mapped apart
    before = _anon_bytes()
    grown = at_least(a, len(a) + 1)
    added = _anon_bytes() - before
    assert len(grown) == 2 * len(a) and grown[: len(a)].all() and not grown[len(a) :].any()
    assert added < 1.25 * a.nbytes, f"{added / a.nbytes:.2f} of the old array's size became resident"
    assert at_least(np.array([1, 2], np.int8), 3, -1).tolist() == [1, 2, -1, -1]
