"""page_db_check: verify every invariant of a page database.

    page_db_check PATH [--no-urls]

Checks that the cash books balance (sum of cash + owed + virtual page = 1,
no negative cash or history, G = sum of history), that page indices are
dense and consistent (one record, one URL and a unique fingerprint per
index, the fingerprint is that of the URL, hosts and parents exist), that
every link joins two existing pages with no self-links or duplicates and
matches the stored out-degree, that leases and crawl records are sane, and
that stored rankings are finite, and that every stored request the
frontier may still hand out decodes and is well formed. Exit status 0 when
all hold, 1 with the list of failures otherwise, 2 when PATH is not a page
database. ``--no-urls`` skips recomputing every URL's fingerprint (the
slow part).

``--repair`` (no crawl may be writing) fixes what the frontier could not
serve: a page whose key is not its request's (its URL's fingerprint, or
method, URL and body: :mod:`~frontera_linkrank.storage.identity`) gets its
own (or, when that page exists already, is given up as a duplicate), a
page whose stored request is unreadable or malformed is given up with the
reason, and cash books off by a rounding (less than 1e-6) are balanced
through the virtual page; each repair is one line, and the checks run
again after.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import sys
import time

import numpy as np

from ..core.codec import malformed_parts
from ..numeric import exact_sum, unique
from ..storage.errors import LMDB_DAMAGE
from ..storage.fpindex import marked_written
from ..storage.fptables import read_held, read_marks
from ..storage.identity import SECTION, key_for, key_scheme, stored_request_key
from ..storage.keys import as_keys
from ..storage.packed import Unreadable
from ..storage.pagedb import CorruptDatabase, PageDB
from ..storage.urls import RejectedURL, check_url
from ..storage.vertices import CRAWLED, ERROR, F_EXTRAS, F_SEED, LEASED, NO_PAGE, STATE_NAMES
from .common import Argv, books, open_db, parser, tool

TOL = 1e-9
# Every page's balance carries the rounding of the float64 updates that
# made it (a few 1e-16 of the total of 1 each), so the books of n pages
# are exact to about n * 1e-16; the check allows a few times that.
TOL_PER_PAGE = 2e-15
# Cash books off by less than this have lost no page's cash, only rounding
# (an accumulator whose reads round, algorithms.md §1.4): --repair rebalances them.
DRIFT = 1e-6
REPAIRED = "given up by page_db_check --repair"  # the error of a page a repair gave up


def writer_active(path: str) -> bool:
    """True if a process holds the page database's writer lock."""
    try:
        fd = os.open(os.path.join(path, "writer.lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def check_cash(db: PageDB) -> list[str]:
    """The AOPIC books: cash conserved, nothing negative, G the sum of history."""
    a = books(db)
    v, n = db.vertices, db.n_pages
    out = []
    r = a.residual()
    if not abs(r) < TOL + TOL_PER_PAGE * n:
        out.append(f"cash not conserved: sum of cash + owed + virtual page = 1 {r:+.3e}")
    neg = np.flatnonzero(v.cash[:n] < 0)
    if len(neg):
        out.append(f"{len(neg)} pages with negative cash (first: index {neg[0]})")
    if a.omega < 0:
        out.append(f"virtual page has negative cash {a.omega}")
    owed = a.owed()
    if (owed < -TOL).any():
        out.append(f"{int((owed < -TOL).sum())} pages owed negative cash (stamp beyond the accumulator)")
    h = v.history[:n]
    if (h < 0).any():
        out.append(f"{int((h < 0).sum())} pages with negative history")
    total = exact_sum(h)
    if not abs(total - a.G) <= TOL * max(1.0, abs(a.G)):
        out.append(f"total history G = {a.G!r} but the pages' history sums to {total!r}")
    return out


def check_fingerprint_table(db: PageDB, txn: object, fps: np.ndarray) -> list[str]:
    """The ``fps`` table a crawl finds its pages by: every entry names the
    page whose fingerprint it is, and every page before the metadata's
    ``fps_from`` or its key range's mark has its entry (later ones may be
    held in memory by the crawl that wrote them, which reads them back when
    it opens)."""
    n = len(fps)
    if b"fps" not in db.dbs:  # written before the table existed: a writer opening it builds it
        return []
    start = db.meta.get("fps_from", n)
    if not isinstance(start, int) or not 0 <= start <= n:
        return [f"fps_from {start!r} is not a page index"]
    row = np.dtype([("key", "V20"), ("page", ">u8")])
    present = np.zeros(n, bool)
    wrong = 0
    cur = txn.cursor(db=db.dbs[b"fps"])  # type: ignore[attr-defined]
    entries = iter(cur)
    while True:
        chunk = list(map(b"".join, itertools.islice(entries, 1 << 20)))
        if not chunk:
            break
        sizes = np.fromiter(map(len, chunk), np.int64, len(chunk))
        wrong += int((sizes != row.itemsize).sum())
        got = np.frombuffer(b"".join(c for c in chunk if len(c) == row.itemsize), row)
        page = got["page"]
        inside = page < n
        wrong += int((~inside).sum())
        page = page[inside].astype(np.int64)
        same = (fps[page].view(np.uint8).reshape(-1, 20) == got["key"][inside].view(np.uint8).reshape(-1, 20)).all(1)
        wrong += int((~same).sum())
        present[page[same]] = True
    out = []
    if wrong:
        out.append(f"{wrong} entries of the fingerprint table do not name the page whose key they are")
    # Later pages must be there too if their key range was written since.
    must = np.concatenate([np.ones(start, bool), marked_written(read_marks(txn, db.dbs.get(b"fpsmarks")),
                                                                fps[start:], start)])
    missing = np.flatnonzero(must & ~present)
    if len(missing):
        out.append(f"{len(missing)} pages missing from the fingerprint table (first: index {int(missing[0])})")
    return out + check_held(db, txn, fps, np.flatnonzero(~must))


def check_held(db: PageDB, txn: object, fps: np.ndarray, held: np.ndarray) -> list[str]:
    """The pages a closed crawl stored as held (``fpsheld``, if the
    metadata records them for its page count and ``fps_from``, as an open
    takes them): every page the table lacks (``held``), each with its own
    fingerprint (pages written since, by a version that kept the record,
    are harmless)."""
    record = db.meta.get("fps_held")
    if not isinstance(record, dict) or (record.get("n_pages"), record.get("fps_from")) != (
            len(fps), db.meta.get("fps_from", len(fps))):
        return []
    try:
        if b"fpsheld" not in db.dbs:
            raise ValueError("no fpsheld table")
        keys, pages = read_held(txn, db.dbs[b"fpsheld"], int(record.get("count", -1)))
    except (ValueError, TypeError) as e:
        return [f"the held fingerprints stored at close are damaged ({e}); the next open reads them back"]
    if len(pages) and not 0 <= pages.min() <= pages.max() < len(fps):
        return ["the held fingerprints stored at close name pages outside the page table"]
    lacking = np.setdiff1d(held, pages)
    if len(lacking):
        return [f"{len(lacking)} pages the fingerprint table lacks are not among the held ones stored at close"]
    if (fps[pages].view(np.uint8).reshape(-1, 20) != keys.view(np.uint8).reshape(-1, 20)).any():
        return ["the held fingerprints stored at close are not their pages'"]
    return []


def check_pages(db: PageDB, urls_too: bool) -> list[str]:
    """Page records, URLs, fingerprints, hosts, parents and crawl records."""
    v, n = db.vertices, db.n_pages
    out = []
    st = v.state[:n]
    bad = ~np.isin(st, list(STATE_NAMES))
    if bad.any():
        out.append(f"{int(bad.sum())} pages with an unknown state")
    with db.snapshot() as txn:
        entries = txn.stat(db.dbs[b"urls"])["entries"]
        if entries != n:
            out.append(f"{entries} URLs stored for {n} pages")
        fps = v.fp[:n].tobytes()
        ordered = np.sort(as_keys(v.fp[:n]))  # 20 bytes a page, not a bytes object and a set entry each
        duplicates = int((ordered[1:] == ordered[:-1]).sum())
        del ordered
        if duplicates:
            out.append(f"{duplicates} duplicate fingerprints")
        out += check_fingerprint_table(db, txn, v.fp[:n])
        host = v.host[:n]
        if n and host.max() >= len(db.host_names):
            out.append(f"{int((host >= len(db.host_names)).sum())} pages point to missing hosts")
        par = v.parent[:n]
        badp = (par != NO_PAGE) & (par >= n)
        if badp.any():
            out.append(f"{int(badp.sum())} pages point to missing parents")
        seeds = (v.flags[:n] & F_SEED) != 0
        if (seeds & (v.depth[:n] != 0)).any():
            out.append("seed pages with a depth other than 0")
        if urls_too:
            wrong_fp, wrong_host, missing = [], 0, 0
            scheme = key_scheme(db.meta_section(SECTION))
            for lo in range(0, n, 20_000):
                idx = range(lo, min(lo + 20_000, n))
                for i, u in zip(idx, db.urls(idx, txn)):
                    if u is None:
                        missing += 1
                        continue
                    try:
                        if key_for(scheme, u) != fps[20 * i : 20 * i + 20]:
                            wrong_fp.append(i)
                        if check_url(u) != db.host_names[host[i]]:
                            wrong_host += 1
                    except (RejectedURL, IndexError):
                        wrong_fp.append(i)
            wrong_fp = [i for i in wrong_fp if right_key(db, i, txn) != fps[20 * i : 20 * i + 20]
                        and not repaired(db, i, txn)]
            if missing:
                out.append(f"{missing} pages without a URL")
            if wrong_fp:
                out.append(f"{len(wrong_fp)} pages whose fingerprint is not their URL's (first: index {wrong_fp[0]}; "
                           "page_db_check --repair rewrites them)")
            if wrong_host:
                out.append(f"{wrong_host} pages whose host is not their URL's")
    crawled = st == CRAWLED
    if (crawled & (v.n_crawls[:n] == 0)).any():
        out.append(f"{int((crawled & (v.n_crawls[:n] == 0)).sum())} crawled pages with no crawl counted")
    times = crawled & ((v.first_crawl[:n] <= 0) | (v.first_crawl[:n] > v.last_crawl[:n]))
    if times.any():
        out.append(f"{int(times.sum())} crawled pages with inconsistent crawl times")
    return out


def right_key(db: PageDB, i: int, txn: object) -> bytes | None:
    """The key page ``i`` should have: of its URL and stored request parts,
    in the database's key scheme (None: its URL is not one)."""
    url = db.url(i, txn)
    parts = None
    if db.vertices.flags[i] & F_EXTRAS:
        got = db.request_extras([i], txn).get(i)
        parts = got if isinstance(got, tuple) and not malformed_parts(got) else None
    try:
        return stored_request_key(key_scheme(db.meta_section(SECTION)), url, parts) if url is not None else None
    except RejectedURL:
        return None


def repaired(db: PageDB, i: int, txn: object) -> bool:
    """Page ``i`` was given up by a repair (it stays, unserved, for the record)."""
    return bool(db.vertices.state[i] == ERROR and (db.error_message(i, txn) or "").startswith(REPAIRED))


def unservable_requests(db: PageDB) -> dict[int, str]:
    """Pages the frontier may still hand out whose stored request is
    unreadable or malformed: index -> reason."""
    v, n = db.vertices, db.n_pages
    idx = np.flatnonzero(((v.flags[:n] & F_EXTRAS) != 0) & (v.state[:n] != ERROR)).tolist()
    out = {}
    with db.snapshot() as txn:
        for lo in range(0, len(idx), 20_000):
            for i, parts in db.request_extras(idx[lo : lo + 20_000], txn).items():
                if isinstance(parts, Unreadable):
                    out[i] = f"unreadable ({parts})"
                elif malformed_parts(parts):
                    out[i] = "malformed " + ", ".join(malformed_parts(parts))
    return out


def check_requests(db: PageDB) -> list[str]:
    """Stored requests the frontier would hand out: readable and well formed."""
    bad = unservable_requests(db)
    if not bad:
        return []
    i = min(bad)
    return [f"{len(bad)} pages whose stored request cannot be handed out (first: index {i}, {bad[i]}; "
            "page_db_check --repair gives them up)"]


def repair(path: str) -> list[str]:
    """Fix what the frontier cannot serve (see the module docstring); one line per repair."""
    open_db(path).close()  # a clear line if PATH is no page database (nothing is created)
    db = PageDB(path)  # the writer lock: refused (one line) while a crawl writes
    lines = []
    try:
        v, n = db.vertices, db.n_pages
        scheme = key_scheme(db.meta_section(SECTION))
        wrong = {}
        with db.snapshot() as txn:
            for i, u in enumerate(db.urls(range(n), txn)):
                try:
                    if u is not None and key_for(scheme, u) == bytes(v.fp[i]):
                        continue
                except RejectedURL:
                    pass
                right = right_key(db, i, txn)
                if right is not None and right != bytes(v.fp[i]):
                    wrong[i] = (u, right)
            table = check_fingerprint_table(db, txn, v.fp[:n])
        if table:
            db.rewrite_fingerprint_table()
            lines.append(f"fingerprint table rewritten ({'; '.join(table)})")
        for i, (u, right) in wrong.items():
            j = db.find(right)
            if j is None:
                db.rekey(i, right)
                lines.append(f"page {i} ({u}): key rewritten to its own {right.hex()}")
            else:
                give_up(db, i, f"duplicate of page {j}: its key was not its request's")
                lines.append(f"page {i} ({u}): given up, a duplicate of page {j}")
            db.touch(i)
        for i, reason in sorted(unservable_requests(db).items()):
            give_up(db, i, f"stored request {reason}")
            lines.append(f"page {i}: given up, its stored request is {reason}")
        sections = {}
        r = books(db).residual()
        if TOL + TOL_PER_PAGE * n <= abs(r) < DRIFT and db.meta.get("aopic"):
            state = dict(db.meta["aopic"])
            omega = float(state["omega"])
            if r <= omega:
                state["omega"] = omega - r
            else:  # ω holds less than the excess: the richest page gives the rest
                i = int(np.argmax(v.cash[:n]))
                v.cash[i] -= r - omega
                state["omega"] = 0.0
                db.touch(i)
            sections["aopic"] = state
            lines.append(f"cash books off by {r:+.3e} (rounding): balanced by the virtual page")
        if lines:
            db.commit(sections)
    finally:
        db.close()
    return lines


def give_up(db: PageDB, i: int, why: str) -> None:
    """Mark page ``i`` an error no crawl hands out again, saying why."""
    db.vertices.state[i] = ERROR
    db.set_error(i, f"{REPAIRED}: {why}")
    db.touch(i)


def check_links(db: PageDB) -> list[str]:
    """Stored links: existing ends, no self-links or duplicates, degrees as stored."""
    v, n = db.vertices, db.n_pages
    out = []
    degree = np.zeros(n, np.int64)
    has_row = np.zeros(n, bool)
    bad_dst = self_links = dup_rows = 0
    with db.snapshot() as txn:
        # Rows of pages beyond the page count are reported, not indexed.
        top = max((int(b.src.max()) + 1 for b in db.edges.iter_blocks(txn) if len(b.src)), default=0)
        for src, ptr, dst in db.edges.iter_current(txn, max(n, top)):
            src = np.asarray(src, np.int64)
            dst = np.asarray(dst, np.int64)
            if len(src) and src.max() >= n:
                out.append(f"links from {int((src >= n).sum())} missing pages")
                continue
            lens = np.diff(np.asarray(ptr, np.int64))
            degree[src] = lens
            has_row[src] = True
            bad_dst += int((dst >= n).sum())
            owner = np.repeat(src, lens)
            self_links += int((owner == dst).sum())
            pair = owner * max(n, 1) + dst
            dup_rows += len(pair) - len(unique(pair))
    if bad_dst:
        out.append(f"{bad_dst} links to missing pages")
    if self_links:
        out.append(f"{self_links} self-links stored")
    if dup_rows:
        out.append(f"{dup_rows} duplicate links stored")
    mismatch = np.flatnonzero(degree != v.n_out[:n])
    if len(mismatch):
        out.append(
            f"{len(mismatch)} pages whose stored out-degree differs from their links (first: index {mismatch[0]})"
        )
    return out


def check_leases(db: PageDB) -> tuple[list[str], list[str]]:
    """Lease times (failures) and leases left by a stopped crawl (notes)."""
    v, n = db.vertices, db.n_pages
    out, notes = [], []
    leased = v.state[:n] == LEASED
    lease = v.lease[:n]
    now = time.time()
    bad = leased & ((lease <= 0) | (lease > now + 60))
    if bad.any():
        out.append(f"{int(bad.sum())} leased pages with no or a future lease time")
    if leased.any() and not writer_active(db.path):
        notes.append(f"{int(leased.sum())} leases left by a stopped crawl: offered again on the next run")
    return out, notes


def check_scores(db: PageDB) -> list[str]:
    """Stored rankings: finite, no longer than the page table."""
    out = []
    with db.snapshot() as txn:
        for name in db.score_names(txn):
            values, info = db.read_scores(name, txn)
            if len(values) > db.n_pages:
                out.append(f"ranking {name!r} covers {len(values)} pages, the database has {db.n_pages}")
            if not np.isfinite(values).all():
                out.append(f"ranking {name!r} has {int((~np.isfinite(values)).sum())} non-finite values")
    return out


@tool("page_db_check")
def main(argv: Argv, prog: str) -> int:
    """Check the database at PATH; exit status 1 when an invariant fails."""
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("--no-urls", action="store_true", help="skip re-fingerprinting every URL")
    ap.add_argument("--repair", action="store_true",
                    help="rewrite keys that are not their URL's, give up pages whose stored request cannot be "
                         "handed out (no crawl may be running)")
    args = ap.parse_args(argv)
    if args.repair:
        for line in repair(args.path):
            print(f"repaired {line}")
    try:
        db = open_db(args.path, full_check=True)  # every B-tree page, however the file was closed
    except CorruptDatabase as e:
        print(f"FAIL {e}")
        return 1
    failures, notes = [], []
    try:
        failures += check_cash(db)
        failures += check_pages(db, not args.no_urls)
        try:
            failures += check_links(db)
        except ValueError as e:
            failures.append(f"links unreadable: {e}")
        lease_fail, notes = check_leases(db)
        failures += lease_fail
        failures += check_scores(db)
        failures += check_requests(db)
    except (CorruptDatabase, *LMDB_DAMAGE) as e:  # damage found while reading: the checks end here
        failures.append(str(e))
    finally:
        n = db.n_pages
        db.close()
    for note in notes:
        print(f"note {note}")
    for f in failures:
        print(f"FAIL {f}")
    if failures:
        return 1
    print(f"OK {args.path}: {n:,} pages, all invariants hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
