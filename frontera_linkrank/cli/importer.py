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
    INFO lacks), or longer than --max-line-bytes (1 MiB by default; such a
    line is never held in memory whole): the import stops with its line
    number and exit status 1,
    since it usually means a wrong file or format. What was read before it
    is committed; fix the line and run again (importing is idempotent).
    --skip-malformed skips and counts such lines instead.

Progress goes to stderr (tqdm, on a terminal); a summary line at the end.
Exit status 0 when done, 1 when stopped at a malformed line, 2 on a wrong
PATH or file, when a crawl holds the page database, or when the disk is
full (``PATH: disk full, ...``; what was committed before stays: free
some space and run again, importing is idempotent).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable

import lmdb
import numpy as np
from tqdm import tqdm

from ..core.graph_import import LinkLoader, add_pages
from ..core.status import STALE_STATUS
from ..settings import LinkRankSettings
from ..storage.environment import write_error
from ..storage.pagedb import PageDB, WriterLockedError
from ..storage.urls import RejectedURL, check_url
from .common import Argv, ToolError, error_line, parser, tool
from .import_formats import CHUNK_BYTES, MAX_LINE_BYTES, InfoHeader, Malformed, Source, index_pairs, url_pairs
from .import_resolve import IndexPages, UrlPages
from .import_write import restore_dumped_pages

REPORT = 10  # bad lines reported one by one


class Importer:
    """The import of one input into a writer page database.

    Parameters
    ----------
    db : PageDB
        The page database written to (writer lock held).
    crawl_time : float
        UNIX time recorded as the crawl of pages with links.
    max_url_length : int
        Longer URLs are skipped.
    skip_malformed : bool
        Skip and count malformed lines instead of stopping at the first.
    keep_crawl_times : bool
        Pages keep the crawl times they have (restored from a dump).
    prog : str
        Program name heading the lines reported on stderr.
    """

    def __init__(self, db: PageDB, crawl_time: float, max_url_length: int, skip_malformed: bool,
                 keep_crawl_times: bool = False, prog: str = "page_db_import") -> None:  # fmt: skip
        self.db = db
        self.loader = LinkLoader(db, crawl_time, keep_crawl_times)
        self.pages = UrlPages(db, max_url_length)
        self.max_url_length = max_url_length
        self.skip_malformed = skip_malformed
        self.prog = prog
        self.skipped: Counter[str] = Counter()  # reason -> lines
        self.reported = 0
        self.lines = 0  # link lines read
        self.links = 0  # links passed to the loader
        self.info_pages = 0  # pages added from an info file
        self.file = ""

    @property
    def new_pages(self) -> int:
        """Pages added to the database so far."""
        return self.pages.new_pages + self.info_pages

    # -- reporting ------------------------------------------------------------------
    def skip(self, lineno: int, reason: str, detail: str) -> None:
        """Count a skipped line; report the first ones on stderr."""
        self.skipped[reason] += 1
        if self.reported < REPORT:
            self.reported += 1
            print(f"{self.prog}: {self.file}:{lineno}: skipped ({reason}): {detail}", file=sys.stderr)

    def malformed(self, lineno: int, message: str, line: bytes | str) -> None:
        """A line in the wrong format: raise :class:`Malformed`, or skip it with --skip-malformed."""
        if not self.skip_malformed:
            raise Malformed(f"{self.file}:{lineno}: {message}: {line[:200]!r}")
        self.skip(lineno, "malformed line", f"{message}: {line[:200]!r}")

    # -- SRC_URL<TAB>DST_URL --------------------------------------------------------
    def link_chunk(self, first: int, data: bytes) -> None:
        """A chunk of ``SRC_URL<TAB>DST_URL`` lines."""
        flat, linenos, stop = url_pairs(first, data, self.malformed)
        codes = self.pages.codes(flat)
        src, dst = codes[0::2], codes[1::2]
        if linenos is None:
            linenos = np.arange(first, first + len(src))
        self.lines += len(src)
        bad = (src < 0) | (dst < 0)
        if bad.any():
            for k in np.flatnonzero(bad).tolist():
                s, d = int(src[k]), int(dst[k])
                code, raw = (s, flat[2 * k]) if s < 0 else (d, flat[2 * k + 1])
                self.skip(int(linenos[k]), self.pages.reason(code), raw.decode("utf-8", "replace")[:200])
            src, dst = src[~bad], dst[~bad]
        self.links += len(src)
        self.loader.add(src, dst)
        if stop is not None:
            raise stop

    # -- page_db_dump links + info ---------------------------------------------------
    def info_file(self, source: Source, progress: Callable[[Source], None]) -> IndexPages:
        """Read a ``page_db_dump info`` file: add its pages, restore their
        fields; return the map of its indices to page indices."""
        self.file = source.path
        index = IndexPages()
        header = None
        for first, data in source.chunks():
            rows = data.split(b"\n")[:-1]
            if header is None:
                if not rows:
                    continue
                header = InfoHeader.parse(rows[0], f"{source.path}:{first}")
                rows, first = rows[1:], first + 1
            stop = self.info_rows(first, rows, header, index)
            self.db.commit(STALE_STATUS)
            progress(source)
            if stop is not None:
                raise stop
        if header is None:
            raise ToolError(f"{source.path}: empty (expected a page_db_dump info file)")
        return index

    def info_rows(self, first: int, rows: list[bytes], header: InfoHeader, index: IndexPages) -> Malformed | None:
        """Add the pages of a chunk of info rows and restore their fields;
        return the :class:`Malformed` error that ended it early (or None)."""
        hashes, urls, hosts, idx, values, skipped = [], [], [], [], [], []
        listed = set()
        stop = None
        for k, row in enumerate(rows):
            try:
                parts = row.split(b" ")
                if len(parts) != header.width:
                    self.malformed(first + k, f"expected {header.width} space-separated columns", row)
                    continue
                try:
                    fp, i, fields = header.row(parts)
                except ValueError:
                    self.malformed(first + k, "bad hash, index or number", row)
                    continue
                if index.listed(i) or i in listed:
                    self.malformed(first + k, f"index {i} listed twice", row)
                    continue
            except Malformed as e:
                stop = e  # the rows before it are still imported
                break
            listed.add(i)
            raw = header.url(parts)
            try:
                u = raw.decode("utf-8")
                host = check_url(u, self.max_url_length)
            except UnicodeDecodeError:
                self.skip(first + k, "invalid_utf8", repr(raw[:200]))
                skipped.append(i)
                continue
            except RejectedURL as e:
                self.skip(first + k, e.reason, u[:200])
                skipped.append(i)
                continue
            hashes.append(fp)
            urls.append(u)
            hosts.append(host)
            idx.append(i)
            values.append(fields)
        before = self.db.n_pages
        pages = add_pages(self.db, urls, hashes, hosts)
        self.info_pages += self.db.n_pages - before
        index.set(idx, pages, skipped)
        restore_dumped_pages(self.db, pages, values, header.wanted)
        return stop

    def index_chunk(self, first: int, data: bytes, index: IndexPages) -> None:
        """A chunk of ``page_db_dump links`` lines (``from to``)."""
        pairs, linenos, stop = index_pairs(first, data, self.malformed)
        src, dst = pairs[:, 0], pairs[:, 1]
        s, d = index.lookup(src), index.lookup(dst)
        unknown = (s == IndexPages.NOT_LISTED) | (d == IndexPages.NOT_LISTED)
        for k in np.flatnonzero(unknown).tolist():
            try:
                self.malformed(int(linenos[k]), "page index not in the info file", f"{src[k]} {dst[k]}")
            except Malformed as e:
                stop = e  # keep the lines before it
                s, d, src, dst, linenos, unknown = s[:k], d[:k], src[:k], dst[:k], linenos[:k], unknown[:k]
                break
        skipped = (s == IndexPages.SKIPPED) | (d == IndexPages.SKIPPED)  # a page whose info line was skipped
        for k in np.flatnonzero(skipped & ~unknown).tolist():
            self.skip(int(linenos[k]), "page skipped in the info file", f"{src[k]} {dst[k]}")
        ok = ~(unknown | skipped)
        self.lines += len(s)
        self.links += int(ok.sum())
        self.loader.add(s[ok], d[ok])
        if stop is not None:
            raise stop


def default_crawl_time(path: str) -> float:
    """The crawl time of a link list: its modification time (now for stdin)."""
    if path == "-":
        return time.time()
    return os.path.getmtime(path)


def arguments(prog: str) -> argparse.ArgumentParser:
    """The tool's argument parser."""
    max_url_length = LinkRankSettings().MAX_URL_LENGTH  # the crawl's default
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory (created if needed)")
    ap.add_argument("edges", help="link list: SRC_URL<TAB>DST_URL lines, "
                    "or with --info page_db_dump links output ('-': stdin)")
    ap.add_argument("--info", metavar="FILE", help="page_db_dump info output of the same database as EDGES")
    ap.add_argument("--crawl-time", type=float, metavar="SECONDS",
                    help="UNIX time recorded as the crawl of pages with links (default: EDGES's modification time)")
    ap.add_argument("--skip-malformed", action="store_true", help="skip and count malformed lines instead of stopping")
    ap.add_argument("--max-url-length", type=int, default=max_url_length, metavar="N",
                    help="longer URLs are skipped (default %(default)s, as the crawl)")
    ap.add_argument("--chunk-bytes", type=int, default=CHUNK_BYTES, metavar="N",
                    help="input read per chunk, one commit each (default %(default)s)")
    ap.add_argument("--max-line-bytes", type=int, default=MAX_LINE_BYTES, metavar="N",
                    help="a longer line is malformed (default %(default)s; 0: no limit)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return ap  # fmt: skip


def check_arguments(args: argparse.Namespace) -> float:
    """Refuse impossible arguments; return the crawl time to record."""
    if args.chunk_bytes < 1:
        raise ToolError("--chunk-bytes must be positive")
    if args.max_line_bytes < 0:
        raise ToolError("--max-line-bytes must be 0 (no limit) or positive")
    for f in (args.edges, args.info):
        if f is not None and f != "-" and not os.path.exists(f):
            raise ToolError(f"{f}: no such file")
    if args.info == "-":
        raise ToolError("--info must be a file (EDGES may be '-')")
    crawl_time = args.crawl_time if args.crawl_time is not None else default_crawl_time(args.edges)
    if not crawl_time > 0:
        raise ToolError("--crawl-time must be a positive UNIX time")
    return crawl_time


def read_inputs(imp: Importer, args: argparse.Namespace, bar: tqdm, sources: list[Source]) -> None:
    """Import the info file (if any), then the links, chunk by chunk (opened sources go to ``sources``)."""
    index = None
    if args.info is not None:
        info = Source(args.info, args.chunk_bytes, args.max_line_bytes, imp.malformed)
        sources.append(info)
        bar.reset(total=info.size)
        bar.set_description("info")
        index = imp.info_file(info, _updater(bar, imp))
    edges = Source(args.edges, args.chunk_bytes, args.max_line_bytes, imp.malformed)
    sources.append(edges)
    imp.file = edges.path
    bar.reset(total=edges.size)
    bar.set_description("links")
    update = _updater(bar, imp)
    for first, data in edges.chunks():
        if index is not None:
            imp.index_chunk(first, data, index)
        else:
            imp.link_chunk(first, data)
        update(edges)
    imp.loader.finish()


@tool("page_db_import")
def main(argv: Argv, prog: str) -> int:
    """Import EDGES (and INFO) into the database at PATH; exit status 1 at a malformed line."""
    args = arguments(prog).parse_args(argv)
    crawl_time = check_arguments(args)
    try:
        db = PageDB(args.path, sync=False)
    except WriterLockedError as e:
        raise ToolError(f"{e}. {prog} needs the writer lock: stop the crawl first") from None
    started = time.perf_counter()
    imp = Importer(db, crawl_time, args.max_url_length, args.skip_malformed, keep_crawl_times=args.info is not None,
                   prog=prog)  # fmt: skip
    bar = _progress_bar(args.quiet)
    sources: list[Source] = []
    try:
        try:
            read_inputs(imp, args, bar, sources)
        except Malformed as e:
            imp.loader.finish()  # keep what was read before the bad line (a rerun redoes it)
            bar.close()
            error_line(prog, e)
            print(
                f"{prog}: stopped; the {imp.links:,} links read before it are in {args.path}. "
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
        _sync_and_close(db)


def _sync_and_close(db: PageDB) -> None:
    """Make the import durable and close; a sync that fails is a write
    error (a full disk: ``disk full``), unless another error is already on
    its way out (then that one is reported)."""
    failing = sys.exc_info()[1] is not None
    try:
        db.env.sync(True)
    except lmdb.Error as e:
        if not failing:
            raise write_error(db.path, e) from None
    finally:
        db.close()


def _summary(imp: Importer, db: PageDB, args: argparse.Namespace, seconds: float) -> None:
    n = db.n_pages
    links = int(db.vertices.n_out[:n].sum())
    rate = imp.lines / seconds if seconds > 0 else float("inf")
    print(
        f"{imp.prog}: {imp.lines:,} links read in {seconds:.1f} s ({rate:,.0f} links/s); "
        f"{imp.new_pages:,} new pages; {args.path} now holds {n:,} pages, {links:,} links",
        file=sys.stderr,
    )
    if imp.skipped:
        what = ", ".join(f"{k} {v:,}" for k, v in imp.skipped.most_common())
        print(f"{imp.prog}: skipped {sum(imp.skipped.values()):,} lines: {what}", file=sys.stderr)


def _progress_bar(quiet: bool) -> tqdm:
    """A tqdm bar on stderr over the bytes read (disabled when not a terminal)."""
    return tqdm(total=None, unit="B", unit_scale=True, disable=True if quiet else None, file=sys.stderr,
                mininterval=0.5, dynamic_ncols=True)  # fmt: skip


def _updater(bar: tqdm, imp: Importer) -> Callable[[Source], None]:
    def update(source: Source) -> None:
        bar.n = source.position()
        bar.set_postfix_str(f"{imp.lines:,} links", refresh=False)
        bar.refresh()

    return update


if __name__ == "__main__":
    sys.exit(main())
