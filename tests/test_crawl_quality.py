"""Crawl ordering on a real web graph (uk-2007-05@100000).

20% of the pages are crawled from 10 random seeds through FrontierManager;
a fetched page reveals only its out-links. Greedy OPIC must collect more
true PageRank than Frontera's memory BFS at 5, 10 and 20% of the pages,
and the hybrid policy (AOPIC cash plus the last periodic PageRank), the
push policy (the known graph's PageRank, current after every batch) and
the default, hybrid-push (cash plus that PageRank), more than both.
"""

import numpy as np

from conftest import dataset
from frontera_linkrank.simulation.crawl import BFS, LINKRANK, compare
from frontera_linkrank.simulation.graphs import Graph
from frontera_linkrank.simulation.metrics import reference_pagerank


def test_opic_beats_bfs_and_the_pagerank_estimates_beat_both():
    graph = Graph.from_npz(dataset("uk-2007-05-100000", "uk-2007-05@100000.csr.npz"), name="uk2007")
    truth = reference_pagerank(graph.indptr, graph.indices)
    assert abs(truth.sum() - 1) < 1e-12
    seeds = np.random.default_rng(0).choice(graph.n, 10, replace=False).tolist()
    runs = {
        "bfs": (BFS, {}),
        "opic": (LINKRANK, {"LINKRANK_POLICY": "opic"}),
        # Default ranking schedule, computed inline so the run is reproducible.
        "hybrid": (LINKRANK, {"LINKRANK_POLICY": "hybrid", "LINKRANK_RANK_BACKGROUND": False}),
        "push": (LINKRANK, {"LINKRANK_POLICY": "push"}),
        "hybrid-push": (LINKRANK, {}),  # the default
    }
    rows = compare(graph, runs, truth, (0.05, 0.10, 0.20), seeds, int(0.2 * graph.n))
    (bfs, _, n_bfs), (opic, _, n_opic), (hybrid, _, n_hybrid) = rows["bfs"], rows["opic"], rows["hybrid"]
    (push, _, n_push), (default, _, n_default) = rows["push"], rows["hybrid-push"]
    assert n_bfs == n_opic == n_hybrid == n_push == n_default == 20_000
    for f, b, o, h, p, hp in zip((5, 10, 20), bfs, opic, hybrid, push, default):
        assert o > b, f"at {f}%: opic {o:.4f} <= bfs {b:.4f}"
        assert h > o, f"at {f}%: hybrid {h:.4f} <= opic {o:.4f}"
        assert p > o, f"at {f}%: push {p:.4f} <= opic {o:.4f}"
        assert hp > o, f"at {f}%: hybrid-push {hp:.4f} <= opic {o:.4f}"
