"""page_db_import: build a page database from a previous crawl's links.

    page_db_import PATH EDGES                 # SRC_URL<TAB>DST_URL lines
    page_db_import PATH LINKS --info INFO     # page_db_dump links + info

EDGES holds one link per line, ``SRC_URL<TAB>DST_URL``; blank lines and
lines starting with ``#`` are skipped. The second form reads the output of
``page_db_dump links`` (``from to`` page indices) with INFO, the output of
``page_db_dump info`` of the same database, which gives each index its URL
and fingerprint and restores first/last crawl time, crawls, changes, depth
and content score. Any input may be gzip-compressed (detected), and ``-``
reads EDGES from standard input.

PATH is created if needed; an existing page database is added to (pages
are matched by fingerprint). Pages with links become crawled, each with
all its links in the input as its current out-links (distinct, self-links
dropped, replacing what it had); the other pages are unfetched. AOPIC cash
is not moved (a crawled database's books stay balanced) and rankings are
not imported: run page_db_rank afterwards. Importing the same input again
leaves the database as it was (crawl times come from INFO, else
--crawl-time, by default the modification time of EDGES; from stdin, now).

Memory: the input is read and committed in chunks (--chunk-bytes); on top
of the page table, a URL -> page cache, and, for a list whose links are not
grouped by source page, 8 bytes per link seen again after its source's
links were written (merged at the end).

Bad lines:
  - a URL the crawler would refuse too (not http(s), malformed, too long,
    invalid UTF-8): its lines are skipped and counted, the first ones
    reported with their line numbers, as a crawl drops such links;
  - a line that is not two fields (or not two indices, or an index that
    INFO lacks): the import stops with its line number and exit status 1,
    since it usually means a wrong file or format. What was read before it
    is committed; fix the line and run again (importing is idempotent).
    --skip-malformed skips and counts such lines instead.

Progress goes to stderr (tqdm, on a terminal); a summary line at the end.
Exit status 0 when done, 1 when stopped at a malformed line, 2 on a wrong
PATH or file, or when a crawl holds the page database.
"""

import gzip
import hashlib
import operator
import os
import re
import sys
import time
from collections import Counter

import numpy as np
from tqdm import tqdm

from .. import default_settings
from ..storage.bulk import LinkLoader, add_pages, settle_pages
from ..storage.pagedb import PageDB, PageDBError
from ..storage.urls import RejectedURL, check_url, fingerprint
from ..storage.vertices import CRAWLED
from .common import ToolError, parser, tool

CHUNK_BYTES = 16 * 1024**2  # input read per chunk (memory per chunk)
CACHE_URLS = 4_000_000  # URL -> page cache entries before it is cleared
REPORT = 10  # bad lines reported one by one


# URLs that canonicalize_url leaves as they are: http(s), a lower-case host,
# an optional port without leading zeros, a path with no "." or ".."
# segment (w3lib resolves those), no query, fragment or ";params", made of
# characters w3lib keeps literally and escapes it keeps (upper-case, of a
# byte it would escape again). Their fingerprint is sha1 of the URL itself,
# ~30x cheaper than canonicalising it, which dominated imports of real
# lists, and their host is as written; test_cli_import_rank checks both
# against check_url and Frontera's fingerprint on generated URLs.
_CANONICAL = re.compile(
    r"https?://([a-z0-9_-]+(?:\.[a-z0-9_-]+)*)(?::([1-9][0-9]{0,4}))?"
    r"(?:/(?:[A-Za-z0-9_~!$&'()*+,=:@|%-][A-Za-z0-9._~!$&'()*+,=:@|%-]*)?)+"
)
_ESCAPE = re.compile(r"%([0-9A-F]{2})")
# RFC 3986 reserved and unreserved characters, "|" and "%": w3lib writes
# them literally in a path, so an escape of one of them is decoded ...
_LITERAL = set(b":/?#[]@!$&'()*+,;=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~|%")
# ... except these four, which it keeps escaped.
_KEPT_ESCAPES = {f"{c:02X}" for c in range(256) if c not in _LITERAL} | {"25", "2F", "3B", "3F"}


def host_and_fingerprint(url, max_length=0):
    """``(check_url(url, max_length), fingerprint(url))`` (raising
    :class:`RejectedURL` like them), with a shortcut for URLs already in
    canonical form: their host is in the URL as is, their fingerprint is
    sha1 of the URL."""
    m = _CANONICAL.fullmatch(url)
    if m is not None and not (max_length and len(url) > max_length):
        port = m.group(2)
        escapes = _ESCAPE.findall(url) if "%" in url else ()
        if (port is None or int(port) < 65536) and len(escapes) == url.count("%") and _KEPT_ESCAPES.issuperset(escapes):
            return m.group(1), hashlib.sha1(url.encode("ascii")).digest()
    return check_url(url, max_length), fingerprint(url)


class Malformed(Exception):
    """A line not in the expected format (stops the import)."""


class Source:
    """An input file (gzip detected, ``-`` = stdin) read in chunks of whole
    lines, with the position for progress."""

    def __init__(self, path, chunk_bytes=CHUNK_BYTES):
        self.path = path
        self.chunk_bytes = chunk_bytes
        if path == "-":
            raw = sys.stdin.buffer
            self.size = None
        else:
            if os.path.isdir(path):
                raise ToolError(f"{path}: is a directory, not a link list")
            try:
                raw = open(path, "rb")
            except OSError as e:
                raise ToolError(f"{path}: cannot read: {e.strerror}") from None
            self.size = os.path.getsize(path)
        self.raw = raw
        head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        self.f = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw
        self.line = 0  # lines before the current chunk

    def position(self):
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def chunks(self):
        """Yield ``(first_line_number, bytes)`` of whole lines."""
        rest = b""
        while True:
            try:
                buf = self.f.read(self.chunk_bytes)
            except (OSError, EOFError) as e:  # truncated or corrupt gzip
                raise ToolError(f"{self.path}: cannot read after line {self.line}: {e}") from None
            if not buf:
                break
            buf = rest + buf
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                rest = buf
                continue
            data, rest = buf[:cut], buf[cut:]
            yield self._emit(data)
        if rest:
            yield self._emit(rest + b"\n")

    def _emit(self, data):
        first = self.line + 1
        self.line += data.count(b"\n")
        if first == 1 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # a UTF-8 byte order mark
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        return first, data

    def close(self):
        if self.raw is not sys.stdin.buffer:
            self.raw.close()


def _one_separator_per_line(data, sep):
    """True if every line of ``data`` is ``field SEP field`` with both fields
    non-empty and no comment line (the fast path; anything else is parsed
    line by line)."""
    b = np.frombuffer(data, np.uint8)
    nl = np.flatnonzero(b == 10)
    sp = np.flatnonzero(b == sep)
    if len(sp) != len(nl):
        return False
    starts = np.r_[0, nl[:-1] + 1]
    return bool(((sp > starts) & (sp + 1 < nl)).all() and not (b[starts] == 35).any())


class Importer:
    """The import of one input into a writer page database."""

    def __init__(self, db, crawl_time, max_url_length, skip_malformed, keep_crawl_times=False):
        self.db = db
        self.loader = LinkLoader(db, crawl_time, keep_crawl_times)
        self.max_url_length = max_url_length
        self.skip_malformed = skip_malformed
        self.cache = {}  # URL bytes -> page index, or -1 - reason code
        self.reasons = []  # reason code -> name
        self.skipped = Counter()  # reason -> lines
        self.reported = 0
        self.lines = 0  # link lines read
        self.links = 0  # links passed to the loader
        self.new_pages = 0
        self.file = ""

    # -- reporting ------------------------------------------------------------------
    def skip(self, lineno, reason, detail):
        self.skipped[reason] += 1
        if self.reported < REPORT:
            self.reported += 1
            print(f"page_db_import: {self.file}:{lineno}: skipped ({reason}): {detail}", file=sys.stderr)

    def malformed(self, lineno, message, line):
        if not self.skip_malformed:
            raise Malformed(f"{self.file}:{lineno}: {message}: {line[:200]!r}")
        self.skip(lineno, "malformed line", f"{message}: {line[:200]!r}")

    # -- URLs -----------------------------------------------------------------------
    def _reason_code(self, reason):
        if reason not in self.reasons:
            self.reasons.append(reason)
        return -1 - self.reasons.index(reason)

    def resolve(self, raw_urls):
        """Put the pages of URLs (bytes, not cached yet) into the cache,
        adding new pages; refused URLs get a negative code."""
        urls, fps, hosts, keys = [], [], [], []
        cache = self.cache
        for raw in raw_urls:
            try:
                u = raw.decode("utf-8").strip()
                host, fp = host_and_fingerprint(u, self.max_url_length)
            except UnicodeDecodeError:
                cache[raw] = self._reason_code("invalid_utf8")
                continue
            except RejectedURL as e:
                cache[raw] = self._reason_code(e.reason)
                continue
            urls.append(u)
            fps.append(fp)
            hosts.append(host)
            keys.append(raw)
        before = self.db.n_pages
        index = add_pages(self.db, urls, fps, hosts)
        self.new_pages += self.db.n_pages - before
        cache.update(zip(keys, index.tolist()))

    def url_pairs(self, first, data):
        """Codes of sources and targets, line numbers and URLs of a chunk's
        lines, and the Malformed error that ended it early (or None)."""
        stop = None
        if _one_separator_per_line(data, 9):
            flat = data.replace(b"\t", b"\n").split(b"\n")
            flat.pop()
            lines = None
        else:
            flat, lines = [], []
            for k, line in enumerate(data.split(b"\n")[:-1]):
                if not line.strip() or line.startswith(b"#"):
                    continue
                a, sep, b = line.partition(b"\t")
                if not sep or b"\t" in b or not a.strip() or not b.strip():
                    try:
                        self.malformed(first + k, "expected SRC_URL<TAB>DST_URL", line)
                    except Malformed as e:
                        stop = e  # the lines before it are still imported
                        break
                    continue
                flat += (a, b)
                lines.append(first + k)
        cache = self.cache
        if len(cache) > CACHE_URLS:
            cache.clear()  # bounded memory; pages are found again by fingerprint
        new = [u for u in dict.fromkeys(flat) if u not in cache]
        if new:
            self.resolve(new)
        # itemgetter looks them all up in one C call (2x faster than map)
        found = operator.itemgetter(*flat)(cache) if len(flat) > 1 else tuple(cache[u] for u in flat)
        codes = np.fromiter(found, np.int64, len(flat))
        linenos = np.arange(first, first + len(flat) // 2) if lines is None else np.asarray(lines, np.int64)
        return codes[0::2], codes[1::2], linenos, flat, stop

    def link_chunk(self, first, data):
        """A chunk of ``SRC_URL<TAB>DST_URL`` lines."""
        src, dst, linenos, flat, stop = self.url_pairs(first, data)
        self.lines += len(src)
        bad = (src < 0) | (dst < 0)
        if bad.any():
            for k in np.flatnonzero(bad).tolist():
                s, d = int(src[k]), int(dst[k])
                code, raw = (s, flat[2 * k]) if s < 0 else (d, flat[2 * k + 1])
                self.skip(int(linenos[k]), self.reasons[-1 - code], raw.decode("utf-8", "replace")[:200])
            src, dst = src[~bad], dst[~bad]
        self.links += len(src)
        self.loader.add(src, dst)
        if stop is not None:
            raise stop

    # -- page_db_dump links + info ---------------------------------------------------
    INFO_FIELDS = (("first_crawl", float), ("last_crawl", float), ("n_changes", int), ("n_crawls", int),
                   ("depth", int), ("score", float))  # fmt: skip

    def info_file(self, source, progress):
        """Read a ``page_db_dump info`` file: add its pages, restore their
        fields; return the array mapping its indices to page indices
        (-1: not listed, -2: listed but skipped)."""
        self.file = source.path
        imap = np.full(0, -1, np.int64)
        cols = None
        for first, data in source.chunks():
            rows = data.split(b"\n")[:-1]
            if cols is None:
                if not rows:
                    continue
                header = rows[0].decode("utf-8", "replace").split()
                missing = [c for c in ("hash", "index", "url") if c not in header]
                if missing:
                    raise ToolError(
                        f"{source.path}:{first}: not a page_db_dump info file (header lacks {', '.join(missing)})"
                    )
                cols = {c: header.index(c) for c in header}
                wanted = [(name, kind, cols[name]) for name, kind in self.INFO_FIELDS if name in cols]
                width = len(header)
                rows, first = rows[1:], first + 1
            hashes, urls, hosts, idx, values, skipped = [], [], [], [], [], []
            listed = set()
            stop = None
            for k, row in enumerate(rows):
                try:
                    parts = row.split(b" ")
                    if len(parts) != width:
                        self.malformed(first + k, f"expected {width} space-separated columns", row)
                        continue
                    try:
                        fp = bytes.fromhex(parts[cols["hash"]].decode("ascii"))
                        i = int(parts[cols["index"]])
                        fields = tuple(kind(parts[c]) for _, kind, c in wanted)
                        if len(fp) != 20 or i < 0 or any(x < 0 for x in fields if type(x) is int):
                            raise ValueError
                    except ValueError:
                        self.malformed(first + k, "bad hash, index or number", row)
                        continue
                    if (i < len(imap) and imap[i] != -1) or i in listed:
                        self.malformed(first + k, f"index {i} listed twice", row)
                        continue
                    listed.add(i)
                    try:
                        u = parts[cols["url"]].decode("utf-8")
                        host = check_url(u, self.max_url_length)
                    except UnicodeDecodeError:
                        self.skip(first + k, "invalid_utf8", repr(parts[cols["url"]][:200]))
                        skipped.append(i)
                        continue
                    except RejectedURL as e:
                        self.skip(first + k, e.reason, u[:200])
                        skipped.append(i)
                        continue
                except Malformed as e:
                    stop = e  # the rows before it are still imported
                    break
                hashes.append(fp)
                urls.append(u)
                hosts.append(host)
                idx.append(i)
                values.append(fields)
            before = self.db.n_pages
            pages = add_pages(self.db, urls, hashes, hosts)
            self.new_pages += self.db.n_pages - before
            top = max(idx + skipped, default=-1)
            if top >= len(imap):
                grown = np.full(max(top + 1, 2 * len(imap)), -1, np.int64)
                grown[: len(imap)] = imap
                imap = grown
            imap[np.asarray(idx, np.int64)] = pages
            imap[np.asarray(skipped, np.int64)] = -2
            self._restore_fields(pages, values, wanted)
            self.db.commit()
            progress(source)
            if stop is not None:
                raise stop
        if cols is None:
            raise ToolError(f"{source.path}: empty (expected a page_db_dump info file)")
        return imap

    def _restore_fields(self, pages, values, wanted):
        v = self.db.vertices
        settle_pages(self.db, pages)  # crawl counts decide AOPIC membership
        if values:
            table = list(zip(*values))
            for (name, kind, _), column in zip(wanted, table):
                getattr(v, name)[pages] = np.asarray(column, np.float64 if kind is float else np.int64)
        crawled = v.n_crawls[pages] > 0
        v.state[pages[crawled]] = CRAWLED
        # A dump rounds times to seconds: a crawled page keeps a positive first crawl.
        early = pages[crawled & (v.first_crawl[pages] <= 0)]
        v.first_crawl[early] = np.maximum(v.last_crawl[early], 1.0)
        v.last_crawl[early] = np.maximum(v.last_crawl[early], v.first_crawl[early])
        self.db.touch(pages)

    def index_chunk(self, first, data, imap):
        """A chunk of ``page_db_dump links`` lines (``from to``)."""
        stop = None
        b = np.frombuffer(data, np.uint8)
        if (((b >= 48) & (b <= 57)) | (b == 32) | (b == 10)).all() and _one_separator_per_line(data, 32):
            pairs = np.fromstring(data.decode("ascii"), dtype=np.int64, sep=" ").reshape(-1, 2)
            linenos = np.arange(first, first + len(pairs))
        else:
            rows, linenos = [], []
            for k, line in enumerate(data.split(b"\n")[:-1]):
                if not line.strip() or line.startswith(b"#"):
                    continue
                parts = line.split()
                if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit():
                    try:
                        self.malformed(first + k, "expected 'FROM TO' page indices", line)
                    except Malformed as e:
                        stop = e
                        break
                    continue
                rows.append((int(parts[0]), int(parts[1])))
                linenos.append(first + k)
            pairs = np.asarray(rows, np.int64).reshape(-1, 2)
            linenos = np.asarray(linenos, np.int64)
        src, dst = pairs[:, 0], pairs[:, 1]
        s = np.where(src < len(imap), imap[np.minimum(src, len(imap) - 1)], -1) if len(imap) else np.full(len(src), -1)
        d = np.where(dst < len(imap), imap[np.minimum(dst, len(imap) - 1)], -1) if len(imap) else np.full(len(dst), -1)
        unknown = (s == -1) | (d == -1)
        for k in np.flatnonzero(unknown).tolist():
            try:
                self.malformed(int(linenos[k]), "page index not in the info file", f"{src[k]} {dst[k]}")
            except Malformed as e:
                stop = e  # keep the lines before it
                s, d, src, dst, linenos, unknown = s[:k], d[:k], src[:k], dst[:k], linenos[:k], unknown[:k]
                break
        skipped = (s == -2) | (d == -2)  # a page whose info line was skipped
        for k in np.flatnonzero(skipped & ~unknown).tolist():
            self.skip(int(linenos[k]), "page skipped in the info file", f"{src[k]} {dst[k]}")
        ok = ~(unknown | skipped)
        self.lines += len(s)
        self.links += int(ok.sum())
        self.loader.add(s[ok], d[ok])
        if stop is not None:
            raise stop


def default_crawl_time(path):
    if path == "-":
        return time.time()
    return os.path.getmtime(path)


@tool("page_db_import")
def main(argv=None):
    ap = parser("page_db_import", __doc__)
    ap.add_argument("path", help="page database directory (created if needed)")
    ap.add_argument("edges", help="link list: SRC_URL<TAB>DST_URL lines, or with --info page_db_dump links output ('-': stdin)")
    ap.add_argument("--info", metavar="FILE", help="page_db_dump info output of the same database as EDGES")
    ap.add_argument("--crawl-time", type=float, metavar="SECONDS",
                    help="UNIX time recorded as the crawl of pages with links (default: EDGES's modification time)")
    ap.add_argument("--skip-malformed", action="store_true", help="skip and count malformed lines instead of stopping")
    ap.add_argument("--max-url-length", type=int, default=default_settings.LINKRANK_MAX_URL_LENGTH, metavar="N",
                    help="longer URLs are skipped (default %(default)s, as the crawl)")
    ap.add_argument("--chunk-bytes", type=int, default=CHUNK_BYTES, metavar="N",
                    help="input read per chunk, one commit each (default %(default)s)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)  # fmt: skip
    if args.chunk_bytes < 1:
        raise ToolError("--chunk-bytes must be positive")
    for f in (args.edges, args.info):
        if f is not None and f != "-" and not os.path.exists(f):
            raise ToolError(f"{f}: no such file")
    if args.info == "-":
        raise ToolError("--info must be a file (EDGES may be '-')")
    crawl_time = args.crawl_time if args.crawl_time is not None else default_crawl_time(args.edges)
    if not crawl_time > 0:
        raise ToolError("--crawl-time must be a positive UNIX time")
    try:
        db = PageDB(args.path, sync=False)
    except PageDBError as e:
        if "another process is writing" in str(e):
            raise ToolError(f"{e}. page_db_import needs the writer lock: stop the crawl first") from None
        raise
    started = time.perf_counter()
    imp = Importer(db, crawl_time, args.max_url_length, args.skip_malformed, keep_crawl_times=args.info is not None)
    bar = _progress_bar(args.quiet)
    sources = []
    try:
        try:
            if args.info is not None:
                info = Source(args.info, args.chunk_bytes)
                sources.append(info)
                bar.reset(total=info.size)
                bar.set_description("info")
                imap = imp.info_file(info, _updater(bar, imp))
            edges = Source(args.edges, args.chunk_bytes)
            sources.append(edges)
            imp.file = edges.path
            bar.reset(total=edges.size)
            bar.set_description("links")
            update = _updater(bar, imp)
            for first, data in edges.chunks():
                if args.info is not None:
                    imp.index_chunk(first, data, imap)
                else:
                    imp.link_chunk(first, data)
                update(edges)
            imp.loader.finish()
        except Malformed as e:
            imp.loader.finish()  # keep what was read before the bad line (a rerun redoes it)
            bar.close()
            print(f"page_db_import: error: {e}", file=sys.stderr)
            print(
                f"page_db_import: stopped; the {imp.links:,} links read before it are in {args.path}. "
                "Fix the line and run again (importing is idempotent), or use --skip-malformed.",
                file=sys.stderr,
            )
            return 1
        bar.close()
        _summary(imp, db, args, time.perf_counter() - started)
        return 0
    finally:
        bar.close()
        for s in sources:
            s.close()
        db.env.sync(True)
        db.close()


def _summary(imp, db, args, seconds):
    n = db.n_pages
    links = int(db.vertices.n_out[:n].sum())
    rate = imp.lines / seconds if seconds > 0 else float("inf")
    print(
        f"page_db_import: {imp.lines:,} links read in {seconds:.1f} s ({rate:,.0f} links/s); "
        f"{imp.new_pages:,} new pages; {args.path} now holds {n:,} pages, {links:,} links",
        file=sys.stderr,
    )
    if imp.skipped:
        what = ", ".join(f"{k} {v:,}" for k, v in imp.skipped.most_common())
        print(f"page_db_import: skipped {sum(imp.skipped.values()):,} lines: {what}", file=sys.stderr)


def _progress_bar(quiet):
    """A tqdm bar on stderr over the bytes read (disabled when not a terminal)."""
    return tqdm(total=None, unit="B", unit_scale=True, disable=True if quiet else None, file=sys.stderr,
                mininterval=0.5, dynamic_ncols=True)  # fmt: skip


def _updater(bar, imp):
    def update(source):
        bar.n = source.position()
        bar.set_postfix_str(f"{imp.lines:,} links", refresh=False)
        bar.refresh()

    return update


if __name__ == "__main__":
    sys.exit(main())
