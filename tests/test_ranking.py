"""PageRank and HITS over a page database against scipy references.

The references are plain scipy power iterations (tests/reference.py) on
the same links (distinct, no self-links, as the database stores them), run
to an L1 change below 1e-12; the database rankers must agree within
L1 < 1e-6, with the links loaded in memory and streamed from LMDB alike.
"""

import os

import numpy as np
import pytest
import scipy.sparse as sp

from frontera_linkrank.core.graph_import import add_graph
from frontera_linkrank.scoring import pattern as pattern_module
from frontera_linkrank.scoring.hits import hits
from frontera_linkrank.scoring.links import MatrixLinks, database_adjacency, database_links, database_rows
from frontera_linkrank.scoring.pagerank import pagerank
from frontera_linkrank.scoring.ranker import RankConfig, rank_snapshot
from frontera_linkrank.settings import LinkRankSettings
from frontera_linkrank.simulation.datasets import data_path, load_hollins, load_uk2007
from frontera_linkrank.storage.pagedb import PageDB
from reference import reference_hits, reference_pagerank


def graph_db(graph, path):
    """A page database holding ``graph`` and the graph's links as a matrix
    in page-index order (distinct, no self-links)."""
    db = PageDB(path, sync=False)
    src = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    fps = [bytes.fromhex(f.decode()) for f in graph.fingerprints]
    hosts = [f"h{h}.{graph.name}.test" for h in graph.hosts] if graph.urls[0].startswith("http://h") else None
    index = add_graph(db, graph.urls, src, graph.indices, fps=fps, hosts=hosts)
    n = db.n_pages
    s, t = index[src], index[graph.indices]
    keep = s != t
    a = sp.csr_matrix((np.ones(int(keep.sum())), (s[keep], t[keep])), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1.0
    return db, a


GRAPHS = {
    "hollins": lambda: load_hollins(data_path("hollins")),
    "uk2007": lambda: load_uk2007(data_path("uk-2007-05-100000", "uk-2007-05@100000.csr.npz")),
}


@pytest.fixture(scope="module", params=sorted(GRAPHS))
def graph_and_db(request, tmp_path_factory):
    graph = GRAPHS[request.param]()
    db, a = graph_db(graph, tmp_path_factory.mktemp(request.param) / "db")
    yield graph, db, a
    db.close()


@pytest.mark.parametrize("mode", ["memory", "stream"])
def test_pagerank_agrees_with_scipy(graph_and_db, mode):
    _, db, a = graph_and_db
    ref = reference_pagerank(a, np.ones(a.shape[0]))
    with db.snapshot() as txn:
        links = database_links(db, txn, mode=mode)
        assert links.streamed == (mode == "stream")
        assert links.n_links == a.nnz
        r = pagerank(links, tol=1e-10)
    assert r.converged and r.stopped == "tolerance"
    assert abs(r.scores.sum() - 1) < 1e-12
    assert np.abs(r.scores - ref).sum() < 1e-6


@pytest.mark.parametrize("mode", ["memory", "stream"])
def test_personalised_pagerank_agrees_with_scipy(graph_and_db, mode):
    _, db, a = graph_and_db
    n = a.shape[0]
    rng = np.random.default_rng(1)
    scores = np.where(rng.random(n) < 0.1, rng.random(n), np.nan)  # a tenth of the pages scored
    db.vertices.score[:n] = scores
    teleport = np.nan_to_num(scores)
    ref = reference_pagerank(a, teleport)
    with db.snapshot() as txn:
        s = LinkRankSettings(RANK_PERSONALIZED=True, RANK_EDGES=mode, RANK_TOLERANCE=1e-10)
        ranking = rank_snapshot(db, RankConfig.from_settings(s, ("pagerank",)), txn)
    assert ranking.info["pagerank"]["personalized"]
    assert np.abs(ranking.vectors["pagerank"] - ref).sum() < 1e-6
    # ... and it differs from plain PageRank by far more than the tolerance.
    assert np.abs(ref - reference_pagerank(a, np.ones(n))).sum() > 0.1


@pytest.mark.parametrize("mode", ["memory", "stream"])
def test_hits_agrees_with_scipy(graph_and_db, mode):
    _, db, a = graph_and_db
    ref_h, ref_a = reference_hits(a)
    with db.snapshot() as txn:
        r = hits(database_links(db, txn, mode=mode), tol=1e-10, max_iter=5000)
    assert r.converged
    assert np.abs(r.hubs - ref_h).sum() < 1e-6
    assert np.abs(r.authorities - ref_a).sum() < 1e-6


def test_streamed_links_read_from_a_copy_outlive_their_snapshot(graph_and_db, tmp_path):
    """With ``spill``, streamed links are copied to an unlinked temporary
    file and read from it: none of their arrays is a view of the database's
    map (without it every one is), PageRank and HITS run after the snapshot
    ended agree with scipy, and the directory is left empty."""
    _, db, a = graph_and_db
    with db.snapshot() as txn:
        blocks = [np.frombuffer(v, np.uint8) for _, v in txn.cursor(db=db.dbs[b"edges"])]
        in_place = database_links(db, txn, mode="stream")
        copied = database_links(db, txn, mode="stream", spill=str(tmp_path))
        on_map = [any(np.shares_memory(m.indices, b) for b in blocks) for *_, m in in_place._slices]
        assert on_map and all(on_map)
        assert not any(np.shares_memory(m.indices, b) for *_, m in copied._slices for b in blocks)
        del in_place
    assert os.listdir(tmp_path) == []
    assert copied.streamed and copied.n_links == a.nnz
    ref_h, ref_a = reference_hits(a)
    r, h = pagerank(copied, tol=1e-10), hits(copied, tol=1e-10, max_iter=5000)
    assert np.abs(r.scores - reference_pagerank(a, np.ones(a.shape[0]))).sum() < 1e-6
    assert np.abs(h.hubs - ref_h).sum() < 1e-6 and np.abs(h.authorities - ref_a).sum() < 1e-6


def test_topic_hits_agrees_with_scipy(graph_and_db):
    _, db, a = graph_and_db
    n = a.shape[0]
    relevance = np.random.default_rng(2).random(n)
    ref_h, ref_a = reference_hits(a, relevance)
    with db.snapshot() as txn:
        r = hits(database_links(db, txn, mode="stream"), relevance, tol=1e-10, max_iter=5000)
    assert np.abs(r.hubs - ref_h).sum() < 1e-6
    assert np.abs(r.authorities - ref_a).sum() < 1e-6


def test_inter_host_links_only(graph_and_db):
    graph, db, a = graph_and_db
    hosts = db.vertices.host[: db.n_pages].astype(np.int64)
    coo = a.tocoo()
    keep = hosts[coo.row] != hosts[coo.col]
    assert keep.any() and not keep.all()  # both kinds of links, or the test shows nothing
    b = sp.csr_matrix((np.ones(int(keep.sum())), (coo.row[keep], coo.col[keep])), shape=a.shape)
    ref = reference_pagerank(b, np.ones(a.shape[0]))
    for mode in ("memory", "stream"):
        with db.snapshot() as txn:
            links = database_links(db, txn, mode=mode, inter_host=True)
            assert links.n_links == int(keep.sum())
            x = pagerank(links, tol=1e-10).scores
        assert np.abs(x - ref).sum() < 1e-6, mode
    assert np.array_equal(MatrixLinks(a, hosts, inter_host=True).out_degree, np.diff(b.indptr))


def test_products_in_slices_match_scipy(graph_and_db, monkeypatch):
    """Loaded links are multiplied slice by slice; a page with more in-links
    than a slice holds is a slice of its own. Slicing changes no sum."""
    _, db, a = graph_and_db
    n = a.shape[0]
    rng = np.random.default_rng(3)
    x, y = rng.random(n), rng.random(n)
    with db.snapshot() as txn:
        whole = database_links(db, txn, mode="memory")
        monkeypatch.setattr(pattern_module, "SLICE_LINKS", 50)
        sliced = database_links(db, txn, mode="memory")
    in_degree = np.diff(a.tocsc().indptr)
    assert len(sliced._bt._slices) > 10 and in_degree.max() > 50  # both kinds of slice are used
    assert np.allclose(sliced.push(x), a.T @ x, rtol=1e-12, atol=0)
    assert np.allclose(sliced.pull(y), a @ y, rtol=1e-12, atol=0)
    assert np.array_equal(sliced.push(x), whole.push(x)) and np.array_equal(sliced.pull(y), whole.pull(y))
    assert np.array_equal(sliced.out_degree, np.diff(a.indptr))


@pytest.mark.parametrize("compiled", [True, False], ids=["scipy", "numpy"])
def test_the_products_add_each_pages_terms_as_a_csr_product_does(graph_and_db, monkeypatch, compiled):
    """``pull`` (HITS) reads the transposed arrays column by column, slice
    by slice, without a copy of the links: each page's sum is its terms
    added from zero in the order of its links, bit for bit what a CSR
    product of the adjacency gives; ``push`` (PageRank) reads them row by
    row into one array, bit for bit scipy's CSR product of the whole
    transposed arrays; with scipy's compiled products or without them."""
    _, db, _ = graph_and_db
    if not compiled:
        monkeypatch.setattr(pattern_module, "_compiled_matvecs", lambda: (None, None))
    y = np.random.default_rng(5).random(db.n_pages)
    with db.snapshot() as txn:
        a = database_adjacency(db, txn)
        monkeypatch.setattr(pattern_module, "SLICE_LINKS", 2000)
        sliced = database_links(db, txn, mode="memory")
    assert len(sliced._bt._slices) > 10
    want = a @ y
    partials = np.zeros(db.n_pages)  # each slice's sums added up: the same terms, grouped otherwise
    for r0, r1, m in sliced._bt._slices:
        partials[sliced.rows] += m.T @ y[r0:r1]
    assert np.allclose(partials, want, rtol=1e-12, atol=0) and not np.array_equal(partials, want)
    assert np.array_equal(sliced.pull(y).view(np.uint64), want.view(np.uint64))
    x = np.random.default_rng(6).random(db.n_pages)
    assert np.array_equal(sliced.push(x).view(np.uint64), (a.T.tocsr() @ x).view(np.uint64))


def test_rows_in_page_order_are_the_adjacency(graph_and_db):
    _, db, a = graph_and_db
    with db.snapshot() as txn:
        pages, lens, dst = database_rows(db, txn)
        b = database_adjacency(db, txn)
    deg = np.diff(a.indptr)
    assert np.array_equal(pages, np.flatnonzero(deg)) and np.array_equal(lens, deg[pages])
    rows = np.repeat(pages, lens)
    assert (sp.csr_matrix((np.ones(len(dst)), (rows, dst)), shape=a.shape) != a).nnz == 0
    assert (b != a).nnz == 0 and b.has_sorted_indices


def test_max_iter_is_reported():
    a = sp.random(300, 300, density=0.02, random_state=0, format="csr")
    r = pagerank(a, tol=1e-15, max_iter=3)
    assert (r.iterations, r.converged, r.stopped) == (3, False, "max_iter")
    assert abs(r.scores.sum() - 1) < 1e-12
