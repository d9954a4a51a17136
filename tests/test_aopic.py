"""AOPIC (docs/algorithms.md §1): conservation, convergence, the history window."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontera_linkrank.scoring.aopic import Aopic
from frontera_linkrank.simulation.metrics import reference_pagerank
from frontera_linkrank.storage.vertices import VertexTable
from util import crawl, req

SLOW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def graphs(draw, max_n=25):
    n = draw(st.integers(2, max_n))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=4 * n))
    adj = {i: [] for i in range(n)}
    for a, b in edges:
        adj[a].append(b)  # self-links and duplicates kept: the backend must drop them
    return n, adj


def csr(n, adj):
    """CSR of the graph the frontier sees: distinct links, no self-links."""
    indptr = [0]
    indices = []
    for i in range(n):
        out = sorted({j for j in adj[i] if j != i})
        indices += out
        indptr.append(len(indices))
    return np.array(indptr), np.array(indices, dtype=np.int64)


def url(i):
    return f"http://h{i % 3}.test/{i}"


@SLOW
@given(
    g=graphs(),
    batch=st.integers(1, 8),
    policy=st.sampled_from(["opic", "fifo", "score"]),
    omega=st.sampled_from(["all", "unfetched", "fetched", "hosts"]),
    damping=st.floats(0.05, 0.95),
    weights=st.sampled_from([(1.0, 1.0), (1.0, 3.0), (0.0, 1.0), (2.0, 0.0)]),
    budget=st.sampled_from([0, 2, 5]),
    cap=st.sampled_from([0, 1, 3]),
    window=st.sampled_from([None, 0.5, 3.0]),
)
def test_cash_conserved_after_every_batch(
    tmp_path_factory, g, batch, policy, omega, damping, weights, budget, cap, window
):
    from frontera_linkrank import LinkRankBackend

    n, adj = g
    path = tmp_path_factory.mktemp("db") / "db"
    settings = {
        "LINKRANK_PATH": str(path),
        "LINKRANK_SYNC": False,
        "LINKRANK_POLICY": policy,
        "LINKRANK_OMEGA_POLICY": omega,
        "LINKRANK_OMEGA_HOSTS": ["h1.test"],
        "LINKRANK_DAMPING": damping,
        "LINKRANK_INTERNAL_WEIGHT": weights[0],
        "LINKRANK_EXTERNAL_WEIGHT": weights[1],
        "LINKRANK_MAX_PAGES_PER_HOST": budget,
        "LINKRANK_MAX_LINKS_PER_PAGE": cap,
        "LINKRANK_HISTORY_WINDOW": window,
        "LINKRANK_HISTORY_TIME": "cash",
    }
    b = LinkRankBackend(settings=settings)
    b.add_seeds([req(url(0)), req(url(n - 1))])
    assert abs(b.core.aopic.residual()) < 1e-9
    rounds = 0
    while rounds < 3:  # crawl, then recrawl everything twice
        reqs = b.get_next_requests(batch)
        assert abs(b.core.aopic.residual()) < 1e-9
        if not reqs:
            rounds += 1
            if rounds == 3:
                break
            for i in range(n):  # recrawl every known page
                if b.db.find(bytes.fromhex(req(url(i)).meta[b"fingerprint"].decode())) is not None:
                    crawl(b, req(url(i)), [url(j) for j in adj[i]])
            continue
        for r in reqs:
            i = int(r.url.rsplit("/", 1)[1])
            crawl(b, r, [url(j) for j in adj[i]])
    assert abs(b.core.aopic.residual()) < 1e-9
    b.frontier_stop()
    # The books balance from what is on disk, too.
    b2 = LinkRankBackend(settings=settings)
    assert abs(b2.core.aopic.residual()) < 1e-9
    b2.frontier_stop()


@settings(max_examples=30, deadline=None)
@given(g=graphs(max_n=30), damping=st.sampled_from([0.5, 0.85, 0.95]))
def test_cyclic_opic_converges_to_pagerank(g, damping):
    n, adj = g
    indptr, indices = csr(n, adj)
    truth = reference_pagerank(indptr, indices, damping=damping)
    t = VertexTable()
    t.append(n)
    a = Aopic(t, damping=damping)
    a.read_omega()
    out = [indices[indptr[i] : indptr[i + 1]] for i in range(n)]
    rounds = 3000  # 1500 left 1.005e-3 on a 2-cycle with 8 isolated pages (damping 0.85)
    for _ in range(rounds):
        for i in range(n):
            a.leave(i)
            a.read(i, out[i])
            a.join(i)
    assert np.abs(a.importance() - truth).sum() < 1e-3
    assert abs(a.residual()) < 1e-9
    assert a.error_bound == pytest.approx(1 / a.G)


def test_backend_recrawl_cycles_converge_to_pagerank(make_backend):
    """The same through the backend: seeds, discovery, then recrawl cycles."""
    rng = np.random.default_rng(7)
    n = 12
    adj = {i: rng.choice(n, rng.integers(0, 4), replace=False).tolist() for i in range(n)}
    adj[0] = list(range(1, n))  # everything reachable from the seed
    indptr, indices = csr(n, adj)
    truth = reference_pagerank(indptr, indices)
    b = make_backend()
    b.add_seeds([req(url(0))])
    while reqs := b.get_next_requests(100):
        for r in reqs:
            i = int(r.url.rsplit("/", 1)[1])
            crawl(b, r, [url(j) for j in adj[i]])
    for _ in range(1500):
        for i in range(n):
            crawl(b, req(url(i)), [url(j) for j in adj[i]])
        b.get_next_requests(0)  # apply the batch
    est = np.empty(n)
    for i in range(n):
        est[i] = b.importance([b.db.find(bytes.fromhex(req(url(i)).meta[b"fingerprint"].decode()))])[0]
    assert np.abs(est - truth).sum() < 1e-3
    assert abs(b.core.aopic.residual()) < 1e-9


def one_page(history=0.0, last_read=math.nan, cash=1.0, **kw):
    t = VertexTable()
    t.append(1)
    t.history[0] = history
    t.last_read[0] = last_read
    a = Aopic(t, damping=0.85, **kw)
    a.omega = 1.0 - cash
    a.G = history
    t.cash[0] = cash
    return t, a


@settings(max_examples=200, deadline=None)
@given(
    h=st.floats(0, 10),
    c=st.floats(0, 10),
    delta=st.floats(0, 1e6),
    T=st.floats(1e-3, 1e6),
)
def test_history_window_formulas(h, c, delta, T):
    t, a = one_page(history=h, last_read=100.0, cash=c, window=T)
    now = 100.0 + delta
    delta = now - 100.0  # the elapsed time as the code sees it
    a.read(0, np.zeros(0, np.int64), now=now)
    expected = h * (T - delta) / T + c if delta < T else c * T / delta
    assert t.history[0] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert a.G == pytest.approx(expected, rel=1e-12, abs=1e-12)  # G tracks the change
    assert t.last_read[0] == now


@given(c=st.floats(0, 10), T=st.floats(1e-3, 1e6))
def test_first_read_history_is_the_cash(c, T):
    t, a = one_page(cash=c, window=T)
    a.read(0, np.zeros(0, np.int64), now=5.0)
    assert t.history[0] == c


@given(h=st.floats(0, 10), c=st.floats(0, 10))
def test_infinite_window_is_plain_opic(h, c):
    t, a = one_page(history=h, last_read=1.0, cash=c)
    a.read(0, np.zeros(0, np.int64), now=1e9)
    assert t.history[0] == pytest.approx(h + c)


def test_worked_example_of_fixing_opic():
    # Seed 003: cash 10, last read 6 months ago, window 3 months -> 10*3/6 = 5.
    month = 30 * 86400.0
    t, a = one_page(history=7.0, last_read=0.0, cash=10.0, window=3 * month)
    a.read(0, np.zeros(0, np.int64), now=6 * month)
    assert t.history[0] == pytest.approx(5.0)


def test_cash_time_uses_the_cash_clock():
    t = VertexTable()
    t.append(2)
    a = Aopic(t, damping=0.85, window=1.0, cash_time=True)
    a.fund([0, 1])
    a.leave(0)
    a.read(0, np.zeros(0, np.int64), now=123456.0)  # wall time ignored
    a.join(0)
    assert t.last_read[0] == 0.0 and a.clock == pytest.approx(0.5)
    a.leave(1)
    a.read(1, np.zeros(0, np.int64), now=0.0)
    a.join(1)
    assert t.last_read[1] == pytest.approx(0.5)


def test_dropped_links_give_their_shares_to_omega():
    t = VertexTable()
    t.append(3)
    a = Aopic(t, damping=0.8, omega_read_every=10**9)
    a.fund([0])
    a.leave(0)
    a.read(0, np.array([1, 2]), n_dropped=2)  # 4 links, 2 dropped
    a.join(0)
    assert t.cash[1] == pytest.approx(0.8 / 4) and t.cash[2] == pytest.approx(0.8 / 4)
    assert a.omega == pytest.approx(0.2 + 2 * 0.8 / 4)
    assert abs(a.residual()) < 1e-15


def test_internal_external_weights_renormalised():
    t = VertexTable()
    t.append(4)
    t.host[:4] = [0, 0, 1, 1]
    a = Aopic(t, damping=0.5, internal_weight=1.0, external_weight=3.0, omega_read_every=10**9)
    a.fund([0])
    a.leave(0)
    kids = np.array([1, 2, 3])
    a.read(0, kids, same_host=t.host[kids] == t.host[0])
    a.join(0)
    # weights 1, 3, 3 over 7: shares of d*C = 0.5
    assert t.cash[1:4].tolist() == pytest.approx([0.5 / 7, 1.5 / 7, 1.5 / 7])
    assert a.omega == pytest.approx(0.5)
    assert abs(a.residual()) < 1e-15


def test_omega_policy_change_on_reopen_settles_cash(make_backend, tmp_path):
    path = tmp_path / "db"
    b = make_backend(path, OMEGA_POLICY="all")
    b.add_seeds([req(url(0))])
    for r in b.get_next_requests(10):
        crawl(b, r, [url(1), url(2)])
    b.get_next_requests(0)
    b.frontier_stop()
    b = make_backend(path, OMEGA_POLICY="hosts", OMEGA_HOSTS=["h2.test"])
    assert abs(b.core.aopic.residual()) < 1e-9
    for r in b.get_next_requests(10):
        crawl(b, r, [url(3)])
    b.get_next_requests(0)
    assert abs(b.core.aopic.residual()) < 1e-9


def test_omega_reads_keep_the_books_exact_on_a_large_target_set():
    """Late in a large crawl ω's share per member is far below the
    accumulator's precision: each read's rounding, owed to every member,
    must not add up (at 10M pages it would exceed page_db_check's
    tolerance). A page cycle on 1M members: the books stay exact."""
    n = 1_000_000
    t = VertexTable()
    t.append(n)
    t.stamp[:n] = 0.03  # everyone settled at a large accumulator
    t.cash[:1000] = 1e-3
    a = Aopic(t, damping=0.85, state={"omega": 0.0, "G": 0.0, "A": 0.03, "clock": 0.0, "reads": 0})
    assert a.residual() == 0.0 and a.n_target == n
    for step in range(5000):
        i = step % 1000
        a.leave(i)
        a.read(i, np.array([(i + 1) % 1000]))
        a.join(i)
    assert a.omega_reads == 5000 and a.A > 0.03
    assert abs(a.residual()) < 1e-15
    assert 0.0 <= a.omega < 1e-9  # what the reads could not spread waits for the next one


def test_page_db_check_repair_balances_books_off_by_a_rounding(tmp_path, capsys):
    """Books off by a rounding (an accumulator whose reads round adds it
    up) fail the check; --repair balances them through ω, or through the
    richest page when ω holds less than the excess, and nothing else moves."""
    from frontera_linkrank.cli.check import main as page_db_check
    from frontera_linkrank.simulation.crawl import LINKRANK
    from frontera_linkrank.simulation.crawl import crawl as simulate
    from frontera_linkrank.simulation.datasets import load_graph
    from frontera_linkrank.storage.pagedb import PageDB

    simulate(load_graph("hollins"), LINKRANK, [0], 300, batch=50, workdir=str(tmp_path))
    path = str(tmp_path / "db")
    assert page_db_check([path, "--no-urls"]) == 0
    for off in (-3e-8, 3e-8):
        with PageDB(path, sync=False) as db:
            n = db.n_pages
            cash = db.vertices.cash[:n].copy()
            i = int(np.argmax(cash))
            if off < 0:  # less cash than 1: ω gets the difference
                db.commit({"aopic": {**db.meta["aopic"], "omega": db.meta["aopic"]["omega"] + off}})
            else:  # more than 1 and ω cannot give it back: the richest page does
                db.vertices.cash[i] += off
                db.touch(i)
                db.commit()
            omega = db.meta["aopic"]["omega"]
        capsys.readouterr()
        assert page_db_check([path, "--no-urls"]) == 1
        assert "cash not conserved" in capsys.readouterr().out
        assert page_db_check([path, "--repair", "--no-urls"]) == 0
        out = capsys.readouterr().out
        assert "cash books off by" in out and "OK" in out, out
        with PageDB(path, readonly=True) as db:
            a = Aopic.from_saved(db.vertices, db.meta["aopic"])
            assert abs(a.residual()) < 1e-15
            now = db.vertices.cash[:n]
            changed = np.flatnonzero(now != cash)
            if off < 0:
                assert len(changed) == 0 and db.meta["aopic"]["omega"] > omega
            else:
                assert changed.tolist() == [i] and db.meta["aopic"]["omega"] == 0.0
