"""The crawl order of every policy is what it was before the package was
restructured: hashes of the fetch order on Frontera's graph fixtures,
Hollins and uk-2007-05@100000 (first 20,000 pages), recorded with the code
before the change (``tests/data/crawl_order_hashes.json``; see
``tests/order_fingerprints.py``)."""

import json

from order_fingerprints import RECORD, all_orders


def test_crawl_order_of_every_policy_unchanged():
    with open(RECORD) as f:
        expected = json.load(f)
    got = all_orders()
    assert got.keys() == expected.keys()
    changed = sorted(k for k in expected if got[k] != expected[k])
    assert not changed, f"{len(changed)} of {len(expected)} crawl orders changed: {changed[:20]}"
