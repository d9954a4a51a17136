"""Contract tests of the Redis Streams transport against a real redis-server
(tests/brokers.py: a unix socket in tmp_path, AOF on)."""

import time

import pytest

from frontera_linkrank.service import codec
from frontera_linkrank.service.ownership import FrontierRefused, Ownership
from frontera_linkrank.service.redis_transport import RedisTransport


def transport(server, crawl="t"):
    t = RedisTransport(server.url, crawl)
    t.setup(4)
    return t


def test_publish_is_idempotent_by_sequence(redis_server):
    t = transport(redis_server)
    assert t.publish([(0, 1, b"a"), (0, 2, b"b"), (1, 3, b"c")]).added == 3
    again = t.publish([(0, 2, b"b"), (0, 1, b"a"), (1, 3, b"c")])  # republished: nothing added, all found there
    assert (again.added, again.present, again.conflicts) == (0, 3, [])
    assert t.publish([(0, 2, b"b"), (0, 4, b"d")]).added == 1
    assert [t.published_top(p) for p in range(4)] == [4, 3, 0, 0]
    got = t.read_feed("s1", {0: ">", 1: ">"}, 10, 0)
    assert sorted((p, raw) for p, _, raw in got) == [(0, b"a"), (0, b"b"), (0, b"d"), (1, b"c")]


def test_an_entry_that_cannot_be_placed_is_a_conflict_not_a_silent_drop(redis_server):
    t = transport(redis_server)
    t.publish([(0, 1, b"a"), (0, 2, b"b")])
    t.r.xtrim(t.feed_key(0), minid="3-0")  # both gone (another writer's XTRIM), the stream's top stays 2
    res = t.publish([(0, 1, b"a"), (0, 2, b"other")], top=2)
    assert res.added == 0 and res.conflicts == [(0, 1), (0, 2)]


def test_entries_above_the_frontiers_sequence_are_removed_and_publishing_goes_on(redis_server):
    t = transport(redis_server)
    t.publish([(2, 1, b"a")], top=1)
    got = t.read_feed("s1", {2: ">"}, 10, 0)
    # Another writer: an entry with the largest id there is; a spider reads it.
    t.r.xadd(t.feed_key(2), {b"m": b"evil"}, id="18446744073709551615-18446744073709551615")
    assert [raw for _, _, raw in t.read_feed("s1", {2: ">"}, 10, 0)] == [b"evil"]
    res = t.publish([(2, 2, b"b"), (2, 3, b"c")], top=3)
    assert res.added == 2 and res.removed == 1 and res.repaired == [2] and res.conflicts == []
    assert t.published_top(2) == 3
    # The spider's group was set back: it reads the new entries.
    assert [raw for _, _, raw in t.read_feed("s1", {2: ">"}, 10, 0)] == [b"b", b"c"]
    assert [raw for _, _, raw in got] == [b"a"]


def test_a_feed_key_of_another_type_is_replaced(redis_server):
    t = transport(redis_server)
    t.r.delete(t.feed_key(2))
    t.r.set(t.feed_key(2), b"not a stream")
    res = t.publish([(2, 1, b"a")], top=1)
    assert res.added == 1 and res.repaired == [2]
    assert [raw for _, _, raw in t.read_feed("s", {2: ">"}, 10, 0)] == [b"a"]


def test_publish_works_after_the_broker_forgot_its_scripts(redis_server):
    t = transport(redis_server)
    assert t.publish([(0, 1, b"a")]).added == 1
    t.r.script_flush()  # as after a restart: the script is loaded again
    assert t.publish([(0, 2, b"b"), (1, 3, b"c")]).added == 2


def test_one_lock_per_crawl_and_the_run_record(redis_server):
    t = transport(redis_server)
    assert t.claim(b"lock-a", 5, b"run-a") == (True, True)
    assert t.claim(b"lock-b", 5, b"run-b") == (False, False)  # held by a
    assert t.tick(b"lock-a", 5, b"run-a") == (1, 1)
    assert t.tick(b"lock-b", 5, b"run-b") == (0, 0)  # not b's
    t.r.flushdb()
    assert t.tick(b"lock-a", 5, b"run-a") == (2, 2)  # lost, and taken back
    t.release(b"lock-b")  # not b's to release
    assert t.get_raw("frontier") == b"lock-a"
    t.release(b"lock-a")
    assert t.get_raw("frontier") is None


def test_spider_ids_that_are_not_names_are_dropped(redis_server):
    t = transport(redis_server)
    t.heartbeat("s1", {"prefetch": 8}, ttl=30)
    t.r.sadd(t._k("spiders"), b"\xff\xfe", b"a b", b"")
    t.r.set(t._k("hb:s2"), b"\x00garbage")
    t.r.sadd(t._k("spiders"), b"s2")
    spiders = t.spiders()
    assert set(spiders) == {"s1", "s2"} and spiders["s2"] is None
    assert t.refused_records == 4 and t.r.smembers(t._k("spiders")) == {b"s1", b"s2"}


def test_reset_deletes_the_crawls_keys_only(redis_server):
    t = transport(redis_server)
    other = RedisTransport(redis_server.url, "t2")
    other.setup(2)
    t.publish([(0, 1, b"a")])
    t.put("state", {"state": "running"})
    assert t.reset() >= 6
    assert t.r.keys(b"lr:{t}:*") == [] and len(t.r.keys(b"lr:{t2}:*")) == 3


def test_report_and_ack_together_and_a_restarted_spider_rereads_what_it_held(redis_server):
    t = transport(redis_server)
    t.publish([(2, k, f"r{k}".encode()) for k in range(1, 7)])
    got = t.read_feed("s1", {2: ">"}, 4, 0)
    assert [raw for _, _, raw in got] == [b"r1", b"r2", b"r3", b"r4"]
    offset = t.report("s1", b"report", [(2, got[0][1]), (2, got[1][1])])
    assert t.read_log(10, 0) == [(offset, b"report")]
    # "Restarted" (a new connection, same id): its pending entries first, cursor "0".
    t2 = RedisTransport(redis_server.url, "t")
    again = t2.read_feed("s1", {2: "0"}, 10, 0)
    assert [raw for _, _, raw in again] == [b"r3", b"r4"]
    assert [raw for _, _, raw in t2.read_feed("s1", {2: ">"}, 10, 0)] == [b"r5", b"r6"]


def test_take_over_a_dead_spiders_pending_entries(redis_server):
    t = transport(redis_server)
    t.publish([(1, k, b"x") for k in range(1, 4)])
    held = t.read_feed("dead", {1: ">"}, 10, 0)
    assert len(held) == 3
    t.report("dead", b"r", [(1, held[0][1])])
    assert t.take_over("heir", 1) == 2
    assert [i for _, i, _ in t.read_feed("heir", {1: "0"}, 10, 0)] == [held[1][1], held[2][1]]
    assert t.read_feed("dead", {1: "0"}, 10, 0) == []  # no longer the dead one's


def test_log_entries_stay_pending_until_acknowledged(redis_server):
    t = transport(redis_server)
    offsets = [t.send(f"m{k}".encode()) for k in range(3)]
    assert [o for o, _ in t.read_log(10, 0)] == offsets
    assert t.read_log(10, 0) == []  # nothing new
    assert [o for o, _ in t.read_log(10, 0, pending=True)] == offsets  # a restarted frontier re-reads them
    t.ack_log(offsets[:2])
    assert [o for o, _ in t.read_log(10, 0, pending=True)] == offsets[2:]
    t.trim_log(offsets[2])
    assert t.backlog()["log_length"] == 1


def test_trim_keeps_entries_from_the_given_sequence(redis_server):
    t = transport(redis_server)
    t.publish([(0, k, b"x") for k in range(1, 6)])
    t.trim_feed(0, 4)
    assert [i for _, i, _ in t.read_feed("s", {0: ">"}, 10, 0)] == ["4-1", "5-1"]
    assert t.published_top(0) == 5  # the top survives trimming


def test_state_survives_kill9_on_the_append_only_file(redis_server):
    t = transport(redis_server)
    t.publish([(3, k, b"x") for k in range(1, 4)])
    got = t.read_feed("s1", {3: ">"}, 2, 0)
    t.put("assignment", {"version": 5, "owners": ["s1"] * 4})
    epoch = t.epoch()
    time.sleep(1.2)  # appendfsync everysec
    redis_server.kill9()
    redis_server.start()
    assert t.epoch() != epoch  # the client reconnects by itself; the epoch tells the frontier
    assert t.published_top(3) == 3
    assert [i for _, i, _ in t.read_feed("s1", {3: "0"}, 10, 0)] == [i for _, i, _ in got]
    assert t.get("assignment")["version"] == 5


def test_a_wiped_broker_is_seen_and_set_up_again(redis_server):
    t = transport(redis_server)
    t.publish([(0, 7, b"x")])
    redis_server.wipe()
    redis_server.start()
    assert t.published_top(0) == 0 and t.get("assignment") is None
    assert t.read_feed("s", {0: ">"}, 10, 0) == []  # no group yet: nothing, no error
    t.setup(4)
    assert t.publish([(0, 7, b"x")]).added == 1  # republished


def test_heartbeats_expire(redis_server):
    t = transport(redis_server)
    t.heartbeat("s1", {"prefetch": 8}, ttl=0.3)
    t.heartbeat("s2", {"prefetch": 4}, ttl=30)
    assert t.spiders()["s1"]["prefetch"] == 8
    time.sleep(0.5)
    spiders = t.spiders()
    assert spiders["s1"] is None and spiders["s2"]["prefetch"] == 4
    t.forget_spider("s1")
    assert set(t.spiders()) == {"s2"}


class _Book:
    run = None


class _RacedTransport(RedisTransport):
    """Another writer puts ``junk`` on the lock or the run record just before the frontier claims them."""

    def __init__(self, url, crawl, junk):
        super().__init__(url, crawl)
        self.junk, self.claims = junk, 0

    def claim(self, lock, ttl, run):
        self.claims += 1
        if self.claims <= 2:  # before the lock is taken, and before the run record is
            for name, raw in self.junk.items():
                self.r.set(self._k(name), raw)
        return super().claim(lock, ttl, run)


def test_junk_written_on_the_lock_or_run_record_while_a_frontier_claims_it_does_not_stop_it(redis_server):
    for junk in ({"run": b"\x00junk"}, {"frontier": b"\xc1"}, {"run": b"x", "frontier": b"y"}):
        t = _RacedTransport(redis_server.url, "race", junk)
        t.reset()
        t.setup(4)
        book = _Book()
        own = Ownership(t, book, "/db", "race", "redis")
        own.claim(partitions=4)
        assert t.claims >= 3  # a claim failed on the junk; checking again removed it
        assert t.get_raw("frontier") == own.lock and t.get("run")["run"] == book.run


def test_a_frontier_of_another_database_that_claims_first_is_named(redis_server):
    other = codec.record("run", {"run": "r-other", "path": "/other", "host": "h", "created": 0.0}, None)
    t = _RacedTransport(redis_server.url, "race2", {"run": other})
    t.reset()
    t.setup(4)
    with pytest.raises(FrontierRefused, match="belongs to another (run|page database) .*/other"):
        Ownership(t, _Book(), "/db", "race2", "redis").claim(partitions=4)
    assert t.get_raw("frontier") is None  # a refused frontier leaves the lock free


def test_consumed_entries_are_those_read_and_acknowledged(redis_server):
    t = transport(redis_server)
    t.publish([(0, 1, b"a"), (0, 2, b"b"), (0, 3, b"c"), (1, 4, b"d")])
    got = t.read_feed("s1", {0: ">"}, 2, 0)  # entries 1 and 2 of partition 0 read, 3 not
    assert [i for _, i, _ in got] == ["1-1", "2-1"]
    assert t.consumed([(0, 1), (0, 2), (0, 3), (1, 4), (5, 9)]) == set()  # read but pending, unread, no stream
    t.report("s1", b"r", [(0, "1-1")])
    assert t.consumed([(0, 1), (0, 2), (0, 3), (1, 4)]) == {(0, 1)}
