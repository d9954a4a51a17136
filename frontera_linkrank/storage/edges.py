"""Out-links of crawled pages, stored in large blocks.

Each commit appends one block holding a *row* per page read in that batch:
the page's index and its current out-links (a recrawl writes a new row; the
newest row of a page wins, an empty row clears its links). Blocks are merged
in tiers (four blocks of one level make one of the next, keeping the newest
row per page), so a crawl of millions of pages leaves a few dozen blocks and
ranking reads all edges in large sequential pieces instead of one LMDB value
per page. Writes stay sequential: appends and tail merges only.

Block layout (little-endian): a 24-byte header ``b"LRedges1", level(u4),
n_rows(u4), n_edges(u8)``, then ``src`` (u4 × n_rows, ascending), ``ptr``
(u4 × n_rows + 1) and ``dst`` (u4 × n_edges). Row ``r`` links
``src[r]`` to ``dst[ptr[r]:ptr[r+1]]``.
"""

import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .errors import CorruptValue

Rows = tuple[np.ndarray, np.ndarray, np.ndarray]  # (src, ptr, dst) of a row set

MAGIC = b"LRedges1"
_HEADER = struct.Struct("<8sIIQ")
MERGE_FANIN = 4  # blocks of one level merged into one of the next
FROZEN = 0xFFFFFFFF  # level of blocks too large to merge further
FREEZE_EDGES = 1 << 22  # blocks with this many edges are not merged again


def _key(seq: int) -> bytes:
    return seq.to_bytes(8, "big")


class Block:
    """One parsed block; arrays are views on the LMDB value when possible."""

    __slots__ = ("key", "level", "src", "ptr", "dst")

    def __init__(self, key: bytes, level: int, src: np.ndarray, ptr: np.ndarray, dst: np.ndarray) -> None:
        self.key, self.level, self.src, self.ptr, self.dst = key, level, src, ptr, dst

    @property
    def n_edges(self) -> int:
        """Edges in the block."""
        return len(self.dst)

    def edge_sources(self) -> np.ndarray:
        """Source page of every edge (``src`` repeated by row length)."""
        return np.repeat(self.src, np.diff(self.ptr))

    @classmethod
    def parse(cls, key: bytes, buf: bytes | memoryview) -> "Block":
        """The block stored as ``buf`` under ``key`` (arrays view ``buf``)."""
        if len(buf) < _HEADER.size:
            raise CorruptValue(f"edge block {key.hex()} is corrupt ({len(buf)} bytes)")
        magic, level, n_rows, n_edges = _HEADER.unpack_from(buf, 0)
        if magic != MAGIC:
            raise CorruptValue(f"edge block {key.hex()} is corrupt (bad magic)")
        off = _HEADER.size
        if len(buf) != off + 4 * (2 * n_rows + 1 + n_edges):
            raise CorruptValue(f"edge block {key.hex()} is corrupt ({len(buf)} bytes for {n_rows} rows, "
                             f"{n_edges} links)")
        src = np.frombuffer(buf, "<u4", n_rows, off)
        off += 4 * n_rows
        ptr = np.frombuffer(buf, "<u4", n_rows + 1, off)
        off += 4 * (n_rows + 1)
        dst = np.frombuffer(buf, "<u4", n_edges, off)
        # Row bounds size every array built from a block: check them first.
        if ptr[0] != 0 or ptr[-1] != n_edges or (ptr[1:] < ptr[:-1]).any() or (src[1:] <= src[:-1]).any():
            raise CorruptValue(f"edge block {key.hex()} is corrupt (row bounds or sources out of order)")
        return cls(key, level, src, ptr, dst)

    def pack(self) -> bytes:
        """The block's stored bytes (see the module docstring)."""
        return b"".join(
            (
                _HEADER.pack(MAGIC, self.level, len(self.src), len(self.dst)),
                np.ascontiguousarray(self.src, "<u4").tobytes(),
                np.ascontiguousarray(self.ptr, "<u4").tobytes(),
                np.ascontiguousarray(self.dst, "<u4").tobytes(),
            )
        )


def _select_rows(src: np.ndarray, ptr: np.ndarray, dst: np.ndarray, rows: np.ndarray) -> Rows:
    """The rows ``rows`` (indices, in the order wanted) of a row set."""
    lens = (ptr[1:] - ptr[:-1]).astype(np.int64)[rows]
    starts = ptr[:-1].astype(np.int64)[rows]
    new_ptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lens, out=new_ptr[1:])
    edge_idx = np.repeat(starts - new_ptr[:-1], lens) + np.arange(new_ptr[-1])
    return src[rows], new_ptr, dst[edge_idx]


def merge_rows(parts: Sequence[Rows]) -> Rows:
    """Merge row sets ``(src, ptr, dst)`` given oldest first, keeping the
    newest row of each source. Returns ``(src, ptr, dst)`` sorted by src."""
    if len(parts) == 1:
        src, ptr, dst = parts[0]
        if len(src) < 2 or bool((src[1:] > src[:-1]).all()):
            # Sources already in order and distinct (a batch of one page, in
            # a polite crawl nearly every batch): nothing to merge.
            first, last = int(ptr[0]), int(ptr[-1])
            return src.astype(np.int64), ptr.astype(np.int64) - first, dst[first:last].copy()
    src = np.concatenate([p[0] for p in parts]).astype(np.int64)
    lens = np.concatenate([np.diff(p[1].astype(np.int64)) for p in parts])
    dst = np.concatenate([p[2] for p in parts])
    ptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    # np.unique on the reversed sources finds each source's newest row.
    _, first_rev = np.unique(src[::-1], return_index=True)
    rows = len(src) - 1 - first_rev
    return _select_rows(src, ptr, dst, rows)


class EdgeStore:
    """Blocks of out-link rows in the LMDB database ``db``.

    Rows of the current batch are kept in memory (:meth:`add`) and written
    as one block by :meth:`write` inside the batch's write transaction.
    """

    def __init__(self, db: Any) -> None:
        self.db = db
        self._pending_src: list[int] = []
        self._pending_dst: list[Any] = []
        self._blocks: list[tuple[int, int, int]] = []  # (seq, level, n_edges), oldest first
        self._next_seq = 0

    # -- open -----------------------------------------------------------------
    def load(self, txn: Any, next_seq: int) -> None:
        """Read the block directory (headers only)."""
        self._blocks = []
        cur = txn.cursor(self.db)
        for key, buf in cur.iternext():
            magic, level, n_rows, n_edges = _HEADER.unpack_from(buf, 0)
            if magic != MAGIC:
                raise CorruptValue(f"edge block {key.hex()} is corrupt (bad magic)")
            self._blocks.append((int.from_bytes(key, "big"), level, n_edges))
        top = self._blocks[-1][0] + 1 if self._blocks else 0
        self._next_seq = max(int(next_seq), top)

    @property
    def next_seq(self) -> int:
        """Key (sequence number) of the next block written."""
        return self._next_seq

    @property
    def n_blocks(self) -> int:
        """Blocks stored."""
        return len(self._blocks)

    @property
    def n_stored_edges(self) -> int:
        """Edges in all blocks, superseded rows included (an upper bound on
        the current links)."""
        return sum(b[2] for b in self._blocks)

    # -- batch ----------------------------------------------------------------
    def add(self, src: int, dst: Any) -> None:
        """Record that page ``src`` now links to ``dst`` (distinct indices)."""
        self._pending_src.append(src)
        self._pending_dst.append(dst)

    def pending_row(self, src: int) -> np.ndarray | None:
        """Out-links of ``src`` added in the current batch, or None."""
        for k in range(len(self._pending_src) - 1, -1, -1):
            if self._pending_src[k] == src:
                return np.asarray(self._pending_dst[k], np.int64)
        return None

    @property
    def pending_rows(self) -> int:
        """Rows added in the current batch."""
        return len(self._pending_src)

    def discard_pending(self) -> None:
        """Forget the rows of the current batch."""
        self._pending_src, self._pending_dst = [], []

    def write(self, txn: Any) -> tuple[Callable[[], None], int]:
        """Write the pending rows as a block and merge the tail.

        Returns ``(installed, next_seq)``: ``installed()`` is to be called
        once the transaction has committed (it updates the in-memory
        directory), so a failed commit can be retried from the same state.
        """
        blocks = list(self._blocks)
        seq = self._next_seq
        deletes: list[bytes] = []
        if self._pending_src:
            src = np.asarray(self._pending_src, np.int64)
            lens = np.fromiter((len(d) for d in self._pending_dst), np.int64, len(src))
            ptr = np.zeros(len(src) + 1, np.int64)
            np.cumsum(lens, out=ptr[1:])
            dst = (
                np.concatenate(self._pending_dst).astype(np.uint32)
                if ptr[-1]
                else np.zeros(0, np.uint32)
            )
            src, ptr, dst = merge_rows([(src, ptr, dst)])
            block = Block(_key(seq), 0, src, ptr, dst)
            txn.put(block.key, block.pack(), db=self.db)
            blocks.append((seq, 0, len(dst)))
            seq += 1
            blocks = self._merge_tail(txn, blocks, deletes)

        def installed() -> None:
            self._blocks = blocks
            self._next_seq = seq
            self.discard_pending()

        return installed, seq

    def _merge_tail(self, txn: Any, blocks: list[tuple[int, int, int]], deletes: list) -> list[tuple[int, int, int]]:
        while len(blocks) >= MERGE_FANIN:
            tail = blocks[-MERGE_FANIN:]
            level = tail[0][1]
            if level == FROZEN or any(b[1] != level for b in tail):
                break
            parts = []
            for seq, _, _ in tail:
                blk = Block.parse(_key(seq), txn.get(_key(seq), db=self.db))
                parts.append((blk.src, blk.ptr, blk.dst))
            src, ptr, dst = merge_rows(parts)
            new_level = FROZEN if len(dst) >= FREEZE_EDGES else level + 1
            for seq, _, _ in tail[1:]:
                txn.delete(_key(seq), db=self.db)
            merged = Block(_key(tail[0][0]), new_level, src, ptr, dst)
            txn.put(merged.key, merged.pack(), db=self.db)
            blocks = blocks[:-MERGE_FANIN] + [(tail[0][0], new_level, len(dst))]
        return blocks

    def compact(self, txn: Any) -> tuple[Callable[[], None], int]:
        """Rewrite all blocks into as few as possible, dropping superseded
        rows. Returns ``(installed, next_seq)`` like :meth:`write`."""
        parts = [(b.src, b.ptr, b.dst) for b in self.iter_blocks(txn)]
        blocks = []
        for seq, _, _ in self._blocks:
            txn.delete(_key(seq), db=self.db)
        seq = self._next_seq
        if parts:
            src, ptr, dst = merge_rows(parts)
            # Split into frozen blocks of about FREEZE_EDGES edges.
            cuts = np.searchsorted(ptr, np.arange(FREEZE_EDGES, ptr[-1], FREEZE_EDGES))
            bounds = [0, *sorted(set(int(c) for c in cuts) - {0, len(src)}), len(src)]
            for a, b in zip(bounds[:-1], bounds[1:]):
                sub_ptr = ptr[a : b + 1] - ptr[a]
                blk = Block(_key(seq), FROZEN, src[a:b], sub_ptr, dst[ptr[a] : ptr[b]])
                txn.put(blk.key, blk.pack(), db=self.db)
                blocks.append((seq, FROZEN, len(blk.dst)))
                seq += 1

        def installed() -> None:
            self._blocks = blocks
            self._next_seq = seq

        return installed, seq

    # -- read -----------------------------------------------------------------
    def iter_blocks(self, txn: Any, newest_first: bool = False) -> Iterator[Block]:
        """Parsed blocks of the snapshot ``txn``, oldest first by default.

        With a ``buffers=True`` transaction the arrays are views on the map,
        valid until the transaction ends.
        """
        cur = txn.cursor(self.db)
        if newest_first:
            ok = cur.last()
            while ok:
                yield Block.parse(bytes(cur.key()), cur.value())
                ok = cur.prev()
        else:
            for key, buf in cur.iternext():
                yield Block.parse(bytes(key), buf)

    def iter_fresh(self, txn: Any, n_pages: int) -> Iterator[tuple[Block, np.ndarray]]:
        """Yield ``(block, fresh)``, newest first: ``fresh`` marks the
        block's rows that are current (each page's newest row); blocks
        without one are skipped."""
        seen = np.zeros(n_pages, bool)
        for blk in self.iter_blocks(txn, newest_first=True):
            fresh = ~seen[blk.src]
            seen[blk.src] = True
            if fresh.any():
                yield blk, fresh

    def iter_current(self, txn: Any, n_pages: int) -> Iterator[Rows]:
        """Yield ``(src, ptr, dst)`` row sets holding exactly the current
        out-links (each page's newest row), block by block, newest first."""
        for blk, fresh in self.iter_fresh(txn, n_pages):
            if fresh.all():
                yield blk.src, blk.ptr, blk.dst
            else:
                yield _select_rows(blk.src, blk.ptr, blk.dst, np.flatnonzero(fresh))

    def current_edges(self, txn: Any, n_pages: int) -> tuple[np.ndarray, np.ndarray]:
        """All current edges as two arrays ``(src, dst)`` (uint32)."""
        srcs, dsts = [], []
        for src, ptr, dst in self.iter_current(txn, n_pages):
            lens: np.ndarray = np.diff(ptr.astype(np.int64))
            srcs.append(np.repeat(src.astype(np.uint32), lens))
            dsts.append(np.asarray(dst, np.uint32))
        if not srcs:
            return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
        return np.concatenate(srcs), np.concatenate(dsts)

    def out_links(self, txn: Any, page: int) -> np.ndarray:
        """Current out-links of one page (empty if it has none stored)."""
        for blk in self.iter_blocks(txn, newest_first=True):
            r = np.searchsorted(blk.src, page)
            if r < len(blk.src) and blk.src[r] == page:
                return np.array(blk.dst[blk.ptr[r] : blk.ptr[r + 1]], np.uint32)
        return np.zeros(0, np.uint32)
