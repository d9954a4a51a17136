"""The page table's arrays: a field that stays zero for most pages (the
hint) is never written where it is zero, so the kernel backs none of it."""

import numpy as np

from frontera_linkrank.storage.vertices import HOT_FIELDS, HOT_RECORD, VertexTable

MiB = 1 << 20


def _anonymous_bytes(a: np.ndarray) -> int:
    """Anonymous memory the kernel backs in the mappings over ``a``'s data
    (numpy advises huge pages for a large array: its aligned part is a
    mapping of its own)."""
    lo, hi = a.ctypes.data, a.ctypes.data + a.nbytes
    total, inside, seen = 0, False, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start < hi and lo < end
                seen = seen or inside
            elif inside and head == "Anonymous:":
                total += int(line.split()[1]) * 1024
    assert seen, "no mapping holds the array"
    return total


def test_pages_without_hints_hold_no_memory_for_them():
    n = 1 << 24  # 16M pages: each field's array is a mapping of its own
    t = VertexTable(fields=HOT_FIELDS)
    t.append(n - 5)
    t.hint[[7, n // 2]] = [0.5, 2.0]
    t.append(5)  # the arrays double: the hints are carried over
    assert t.n == n and len(t.hint) > n + 5
    assert np.flatnonzero(t.hint).tolist() == [7, n // 2] and t.hint[n // 2] == 2.0
    assert _anonymous_bytes(t.cash) >= 8 * n  # written for every page
    assert _anonymous_bytes(t.hint) <= 8 * MiB  # two hints: at most two (huge) pages of 2 MiB, of 128 MiB


def test_records_loaded_write_only_the_hints_they_hold():
    t = VertexTable(fields=HOT_FIELDS)
    t.append(10)
    recs = np.zeros(4, HOT_RECORD)
    recs["hint"] = [0, 1.5, 0, np.nan]
    recs["cash"] = [1, 2, 3, 4]
    t.load_records(recs, slice(2, 10, 2))
    assert t.cash[2:10:2].tolist() == [1, 2, 3, 4]
    assert t.hint[:5].tolist() == [0, 0, 0, 0, 1.5] and np.isnan(t.hint[8])
    # A record read later (the log) sets a page's hint back to zero as well.
    again = np.zeros(2, HOT_RECORD)
    again["hint"] = [0, 3]
    t.load_records(again, np.array([4, 1]))
    assert t.hint[[1, 4]].tolist() == [3, 0]
    assert np.flatnonzero(t.hint[: t.n]).tolist() == [1, 8]
