"""Which spider fetches which hosts: partitions of hosts and their owners.

A host belongs to partition ``crc32(host) mod P``; each partition has one
owner, a live spider, so a host is fetched by one spider at a time and
Scrapy's per-host politeness holds across machines. The frontier keeps the
assignment; :func:`plan` is the pure rule it applies whenever spiders join
or die:

- a partition whose owner is dead goes at once to a live spider (the new
  owner takes over the dead one's pending requests);
- partitions stay with a live owner (sticky) unless the owners are out of
  balance; then the surplus is *moved*: the partition is marked ``moving``
  to its new owner, the frontier stops handing out its hosts, and the
  switch happens once the old owner has reported everything it held
  (so no host is ever fetched by two spiders at once);
- after the moves every live spider owns ``P // n`` or ``P // n + 1``
  partitions.
"""

from __future__ import annotations

import zlib


def partition_of(host: str, partitions: int) -> int:
    """The partition of ``host`` (crc32 of its name, as Frontera's host partitioner).

    >>> partition_of("example.com", 64) == partition_of("example.com", 64) < 64
    True
    """
    return zlib.crc32(host.encode("utf-8", "surrogateescape")) % partitions


def plan(owners: list[str | None], moving: dict[int, str], live: list[str]) -> tuple[list[str | None], dict[int, str]]:
    """The next ``(owners, moving)`` for the ``live`` spiders.

    Parameters
    ----------
    owners : list of str or None
        Current owner of each partition (None: none yet).
    moving : dict
        Partitions being handed over: partition -> new owner.
    live : list of str
        Spiders alive now.

    Returns
    -------
    owners, moving
        Every partition owned by a live spider (when there is one); each
        moving partition's target is live and not its owner; owners plus
        moves leave every spider with ``P // n`` or ``P // n + 1``.

    Examples
    --------
    >>> owners, moving = plan([None] * 4, {}, ["a"])
    >>> owners, moving
    (['a', 'a', 'a', 'a'], {})
    >>> plan(owners, moving, ["a", "b"])
    (['a', 'a', 'a', 'a'], {2: 'b', 3: 'b'})
    >>> plan(["a", "a", "a", "a"], {2: "b", 3: "b"}, ["b"])
    (['b', 'b', 'b', 'b'], {})
    """
    alive = set(live)
    P = len(owners)
    owners = [o if o in alive else None for o in owners]
    if not live:
        return owners, {}
    moving = {p: t for p, t in moving.items() if t in alive and owners[p] is not None and owners[p] != t}
    # Where each partition ends up once the moves are done.
    final = [moving.get(p, owners[p]) for p in range(P)]
    count = {s: 0 for s in sorted(alive)}
    for o in final:
        if o is not None:
            count[o] += 1
    base, extra = divmod(P, len(alive))
    # The +1 places go to those holding most already (fewer moves).
    order = sorted(count, key=lambda s: (-count[s], s))
    quota = {s: base + (1 if k < extra else 0) for k, s in enumerate(order)}

    def neediest() -> str:
        return min(count, key=lambda s: (count[s] - quota[s], count[s], s))

    # Surplus: partitions above a spider's quota (moving ones first: cancel a move before starting another).
    for s in order:
        mine = [p for p in range(P) if final[p] == s]
        mine.sort(key=lambda p: (p not in moving, -p))
        for p in mine[: max(0, count[s] - quota[s])]:
            final[p] = None
            count[s] -= 1
    for p in range(P):
        if final[p] is None:
            s = neediest()
            final[p] = s
            count[s] += 1
    new_moving = {}
    for p in range(P):
        if owners[p] is None:
            owners[p] = final[p]  # no live owner: straight to the new one
        elif final[p] != owners[p]:
            new_moving[p] = final[p]
    return owners, new_moving
