"""Which spider fetches which hosts: partitions of hosts and their owners.

A host belongs to partition ``host id mod P`` (host ids count the hosts in
the order the crawl found them, so the first ``P`` hosts all get a
partition of their own); each partition has one owner, a live spider, so a
host is fetched by one spider at a time and Scrapy's per-host politeness
holds across machines. A host is never split: a crawl of one site gains
nothing from a second spider.

The frontier keeps the assignment; :func:`plan` is the pure rule it
applies whenever spiders join or die, and as the load moves:

- a partition whose owner is dead goes at once to the live spider with the
  least load (the new owner takes over the dead one's pending requests);
- partitions stay with a live owner (sticky) unless the spiders are out of
  balance; then a partition is *moved*: marked ``moving`` to its new
  owner, the frontier stops handing out its hosts, and the switch happens
  once the old owner has reported everything it held (so no host is ever
  fetched by two spiders at once);
- balance is by *load*: a spider's share of the pages waiting in its
  partitions and of the recent fetches there, plus a tenth of its share of
  the partitions (hosts not found yet land in every partition alike). Two
  big hosts go to two spiders.
"""

from __future__ import annotations

from collections.abc import Sequence

COUNT_WEIGHT = 0.1
"""Weight of a spider's share of the partitions beside its share of the
load (hosts found later land in every partition alike)."""

MIN_GAIN = 0.9
"""A move is made only if it narrows the gap between the most and the least
loaded spider by this many empty partitions' worth (less is not worth the
pause of a move, and loads keep changing)."""


def partition_of(host_id: int, partitions: int) -> int:
    """The partition of the host with id ``host_id``.

    >>> [partition_of(h, 4) for h in range(6)]
    [0, 1, 2, 3, 0, 1]
    """
    return host_id % partitions


def _scores(final: list, load: Sequence[float], live: list[str]) -> tuple[dict, dict, float]:
    total = float(sum(load))
    weight = {s: 0.0 for s in live}
    count = {s: 0 for s in live}
    for p, o in enumerate(final):
        if o is not None:
            weight[o] += load[p]
            count[o] += 1
    return weight, count, total


def plan(owners: list[str | None], moving: dict[int, str], live: list[str], load: Sequence[float] | None = None,
         balance: bool = True) -> tuple[list[str | None], dict[int, str]]:
    """The next ``(owners, moving)`` for the ``live`` spiders.

    Parameters
    ----------
    owners : list of str or None
        Current owner of each partition (None: none yet).
    moving : dict
        Partitions being handed over: partition -> new owner.
    live : list of str
        Spiders alive (and making progress) now.
    load : sequence of float, optional
        Work of each partition (pages waiting plus recent fetches); none:
        partitions count alike.
    balance : bool
        Start moves to even the load out (else only partitions without a
        live owner are given one).

    Returns
    -------
    owners, moving
        Every partition owned by a live spider (when there is one); each
        moving partition's target is live and not its owner.

    Examples
    --------
    >>> owners, moving = plan([None] * 4, {}, ["a"])
    >>> owners, moving
    (['a', 'a', 'a', 'a'], {})
    >>> plan(owners, moving, ["a", "b"])
    (['a', 'a', 'a', 'a'], {0: 'b', 1: 'b'})
    >>> plan(["a", "a", "a", "a"], {2: "b", 3: "b"}, ["b"])
    (['b', 'b', 'b', 'b'], {})

    Two loaded partitions of four, both with ``a``: one of them moves to ``b``.

    >>> plan(["a", "a", "b", "b"], {}, ["a", "b"], load=[500, 400, 0, 0])
    (['a', 'a', 'b', 'b'], {1: 'b'})
    """
    alive = sorted(set(live))
    P = len(owners)
    owners = [o if o in alive else None for o in owners]
    if not alive:
        return owners, {}
    load = list(load) if load is not None else [0.0] * P
    moving = {p: t for p, t in moving.items() if t in alive and owners[p] is not None and owners[p] != t}
    final = [moving.get(p, owners[p]) for p in range(P)]
    weight, count, total = _scores(final, load, alive)

    def score(s: str, dw: float = 0.0, dc: int = 0) -> float:
        n = len(alive)
        share = (weight[s] + dw) / total * n if total > 0 else 0.0
        return share + COUNT_WEIGHT * (count[s] + dc) / P * n

    # Partitions without a live owner: heaviest first, each to the least loaded spider.
    for p in sorted((p for p in range(P) if final[p] is None), key=lambda p: (-load[p], p)):
        s = min(alive, key=lambda s: (score(s), s))
        final[p] = owners[p] = s
        weight[s] += load[p]
        count[s] += 1
    # Moves, one partition at a time, while they narrow the gap between
    # the most and the least loaded spider by enough to be worth a pause.
    unit = COUNT_WEIGHT * len(alive) / P  # the score of one empty partition
    for _ in range(P if balance else 0):
        hi = max(alive, key=lambda s: (score(s), s))
        lo = min(alive, key=lambda s: (score(s), s))
        gap = score(hi) - score(lo)
        best, best_gap = None, gap
        for p in range(P):
            if final[p] != hi or p in moving:
                continue
            after = max(score(hi, -load[p], -1), score(lo, load[p], 1)) - min(score(hi, -load[p], -1),
                                                                              score(lo, load[p], 1))
            if after < best_gap - 1e-9 or (after == best_gap and best is not None and load[p] < load[best]):
                best, best_gap = p, after
        if best is None or gap - best_gap < MIN_GAIN * unit:
            break
        final[best] = lo
        weight[hi] -= load[best]
        weight[lo] += load[best]
        count[hi] -= 1
        count[lo] += 1
        if owners[best] == lo:
            moving.pop(best, None)
        else:
            moving[best] = lo
    return owners, moving
