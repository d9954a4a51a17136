"""The crawl order of every policy is what it was: a refactoring guard.

Hashes of the fetch order on Frontera's graph fixtures, Hollins (whole
crawl, and with host delays) and uk-2007-05@100000 (first 20,000 pages),
recorded from the code before a change (``tests/data/crawl_order_hashes.json``),
recomputed here one part at a time (see ``tests/order_fingerprints.py`` for
what each part covers). The uk-2007 parts are the crawls
``test_crawl_quality.py`` measures: that test checks their hashes, so that
each of those crawls runs once (pytest-xdist would run the two tests in
different processes, each crawling them).

A failure means the change alters what the frontier fetches. If that was
not the intent, it is a bug. If it was (a new default, a different
tie-break), re-record with ``python tests/order_fingerprints.py --write``
and say so in the commit, with the measurement that justifies the new
order (docs/testing.md).
"""

import json

import pytest

from order_fingerprints import PARTS, RECORD, UK2007_PARTS, part_orders


@pytest.fixture(scope="module")
def recorded():
    with open(RECORD) as f:
        return json.load(f)


def test_the_record_holds_exactly_the_parts(recorded):
    assert all(any(k == p or k.startswith(p + "/") for p in PARTS) for k in recorded)
    assert all(any(k == p or k.startswith(p + "/") for k in recorded) for p in PARTS)


@pytest.mark.parametrize("part", [p for p in PARTS if p not in UK2007_PARTS])
def test_crawl_order_unchanged(part, recorded):
    expected = {k: v for k, v in recorded.items() if k == part or k.startswith(part + "/")}
    got = part_orders(part)
    assert got.keys() == expected.keys()
    changed = sorted(k for k in expected if got[k] != expected[k])
    assert not changed, f"{len(changed)} of {len(expected)} crawl orders changed: {changed[:20]}"
