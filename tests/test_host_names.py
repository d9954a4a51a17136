"""Host names in flat buffers (:class:`HostNames`) agree with a dict and a
list through any sequence of additions, bulk loads and lookups, and hold
a few dozen bytes a host besides the names' own."""

import tracemalloc

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from frontera_linkrank.storage import hosts
from frontera_linkrank.storage.hosts import HostNames

NAMES = st.one_of(st.text(max_size=12), st.sampled_from(["a.test", "b.test", "ä.test", "xn--bcher-kva.test", ""]))


@given(bulk=st.lists(NAMES, unique=True, max_size=40), ops=st.lists(st.tuples(st.booleans(), NAMES), max_size=200))
def test_host_names_agree_with_a_dict_and_a_list(bulk, ops):
    names = HostNames(bulk)
    ids, by_id = {n: i for i, n in enumerate(bulk)}, list(bulk)
    for add, name in ops:
        assert names.get(name) == ids.get(name)
        if add and name not in ids:
            ids[name] = len(by_id)
            by_id.append(name)
            assert names.add(name) == ids[name]
    assert len(names) == len(by_id) and list(names) == by_id
    assert all(names[i] == n for i, n in enumerate(by_id))
    assert all(names.get(n) == i for n, i in ids.items())
    assert names == HostNames(by_id)  # a reload (bulk) holds the same hosts


def _decodes(key):
    try:
        key.decode()
    except UnicodeDecodeError:
        return False
    return True


@given(st.lists(st.one_of(st.binary(max_size=6), st.text(max_size=4).map(str.encode)), unique=True, max_size=12))
@example(["ä".encode()[:1], "ä".encode()[1:]])  # the names end to end decode
def test_the_utf8_check_agrees_with_decoding_each_name(keys):
    """Names end to end that decode, split inside a character, are caught."""
    names = HostNames()
    names.extend_encoded(keys)
    assert names.utf8() == all(map(_decodes, keys))


@pytest.mark.parametrize("same", [1 << 20, -1])  # -1: the table's last slot, the others wrap around
def test_colliding_hashes_are_told_apart_by_name(monkeypatch, same):
    """Every name with the same hash: each is found by comparing names,
    absent names are not found."""
    monkeypatch.setattr(hosts, "hash", lambda key: same, raising=False)
    names = HostNames([f"h{i}.test" for i in range(50)])
    for i in range(50, 300):
        assert names.add(f"h{i}.test") == i
    assert [names.get(f"h{i}.test") for i in range(300)] == list(range(300))
    assert names.get("h300.test") is None and names.get("") is None


def test_a_host_costs_a_few_dozen_bytes_besides_its_name():
    """100,000 hosts: the names' bytes, an offset and a hash per host and a
    table at most half full of 4-byte ids (24 to 32 bytes a host), where a
    list of strings and a dict of ids hold an object or three per host."""
    raw = [f"host{i}.example.com" for i in range(100_000)]
    name_bytes = sum(map(len, raw)) / len(raw)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    names = HostNames(raw)
    held = (tracemalloc.get_traced_memory()[0] - base) / len(raw)
    tracemalloc.stop()
    assert len(names) == len(raw)
    assert name_bytes + 24 <= held < name_bytes + 40, held
