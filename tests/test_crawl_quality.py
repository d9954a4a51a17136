"""Crawl ordering on a real web graph (uk-2007-05@100000, hosts inferred).

20% of the pages are crawled from 10 random seeds through FrontierManager;
a fetched page reveals only its out-links. Greedy OPIC must collect more
true PageRank than Frontera's memory BFS at 5, 10 and 20% of the pages,
and the hybrid policy (AOPIC cash plus the last periodic PageRank), the
push policy (the known graph's PageRank, current after every batch) and
the default, hybrid-push (cash plus that PageRank), more than both.

The crawls are the ones whose order ``test_crawl_order_unchanged.py``
guards (``order_fingerprints.uk2007_order``): their hashes are checked
here, against the same record, so that each crawl runs once.
"""

import json

from frontera_linkrank.settings.table import TABLE
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.simulation.metrics import collected, reference_pagerank
from order_fingerprints import POLICIES, RECORD, UK2007_BUDGET, UK2007_PARTS, part_orders, uk2007_order


def test_opic_beats_bfs_the_pagerank_estimates_beat_both_and_the_orders_are_unchanged():
    graph = load_graph("uk2007")
    truth = reference_pagerank(graph.indptr, graph.indices)
    assert abs(truth.sum() - 1) < 1e-12
    assert UK2007_BUDGET == int(0.2 * graph.n)
    default = TABLE["LINKRANK_POLICY"].default
    runs = {name: uk2007_order(name) for name in ("bfs", "opic", "hybrid", "push")}
    # The default settings: the same crawl as its policy named alone.
    runs["default"] = uk2007_order(default if default in POLICIES else "default")
    assert {name: len(order) for name, order in runs.items()} == dict.fromkeys(runs, UK2007_BUDGET)
    assert all(len(set(order)) == len(order) for order in runs.values())  # each page fetched once
    got = {name: collected(list(order), truth, (0.05, 0.10, 0.20)) for name, order in runs.items()}
    for i, f in enumerate((5, 10, 20)):
        b, o, h, p, hp = (got[name][i] for name in ("bfs", "opic", "hybrid", "push", "default"))
        assert o > b, f"at {f}%: opic {o:.4f} <= bfs {b:.4f}"
        assert h > o, f"at {f}%: hybrid {h:.4f} <= opic {o:.4f}"
        assert p > o, f"at {f}%: push {p:.4f} <= opic {o:.4f}"
        assert hp > o, f"at {f}%: the default ({default}) {hp:.4f} <= opic {o:.4f}"
    with open(RECORD) as f:
        recorded = json.load(f)
    hashes = {k: v for part in UK2007_PARTS for k, v in part_orders(part).items()}  # the crawls above, kept
    changed = sorted(k for k, v in hashes.items() if v != recorded[k])
    assert not changed, f"crawl orders changed: {changed} (test_crawl_order_unchanged.py: what that means)"
