"""``benchmarks/scale.py --serve-frontier``: the same web crawled through
``frontera-linkrank serve-frontier`` by fake spider processes (those of
``benchmarks/distributed.py``: they report each request at once with its
links) over a redis-server started here on a unix socket. Memory is that
of the frontier process, read from /proc while the crawl runs; pages and
hosts are those of the state the frontier publishes on the broker."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import tempfile
import time

import numpy as np
from distributed import CRAWL, RedisServer, fake_spider, start_frontier, stop
from scale_report import derive, disk_bytes, memory, progress_line
from scale_web import BroadWeb, page_number

from frontera_linkrank.service.redis_transport import RedisTransport

WEB = BroadWeb()


def web_links(urls: list[str]) -> list[list[str]]:
    """The fake spiders' web: the link URLs of each page."""
    return WEB.link_urls(np.fromiter((page_number(u) for u in urls), np.int64, len(urls)))


def published(url: str) -> dict:
    """The frontier's last published state (empty before the first)."""
    t = RedisTransport(url, CRAWL)
    try:
        return t.get("state") or {}
    finally:
        t.close()


def _row(point: int, state: dict, pid: int, path: str) -> dict:
    stats = state["stats"]
    return {"checkpoint": point, "known": int(stats["pages"]), "crawled": int(stats.get("pages_crawled", 0)),
            "hosts": int(stats["hosts"]), "wall": float(state["time"]), "core": 0.0,
            "disk": disk_bytes(path), **memory(pid)}


def _wait_state(url: str, frontier, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while not (state := published(url)).get("stats"):
        if frontier.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("serve-frontier did not start")
        time.sleep(0.1)
    return state


def run_serve(args, points: list[int]) -> dict:
    work = args.dir or tempfile.mkdtemp(prefix="lr-scale-serve-")
    os.makedirs(work, exist_ok=True)
    server = RedisServer(os.path.join(work, "redis"))
    seeds = os.path.join(work, "seeds.txt")
    with open(seeds, "w") as f:
        f.write(WEB.url(np.array([0]))[0] + "\n")
    frontier = start_frontier(work, "db", server.url, seeds, settings=args.set)
    path = os.path.join(work, "db")
    spiders = [mp.Process(target=fake_spider, args=(server.url, f"scale{k}", time.time() + 7 * 86400, web_links))
               for k in range(args.spiders)]
    result: dict = {"mode": "serve", "settings": args.set, "spiders": args.spiders}
    rows: list[dict] = []
    try:
        state = _wait_state(server.url, frontier)
        start = {**memory(frontier.pid), "known": 0, "crawled": 0, "wall": float(state["time"]), "core": 0.0}
        peak_anon = start["anon"]  # sampled at every poll (the kernel keeps no peak of it)
        result["start"] = {k: start[k] for k in ("rss", "anon", "file")}
        for p in spiders:
            p.start()
        while points:
            time.sleep(0.5)
            if frontier.poll() is not None:
                raise RuntimeError(f"serve-frontier exited with {frontier.returncode} (log: {work}/db.log)")
            state = published(server.url)
            peak_anon = max(peak_anon, memory(frontier.pid)["anon"])
            while points and int(state["stats"]["pages"]) >= points[0]:
                row = _row(points.pop(0), state, frontier.pid, path)
                row["peak_anon"] = peak_anon = max(peak_anon, row["anon"])
                derive(row, rows[-1] if rows else start, timed=False)
                rows.append(row)
                print(progress_line(row), flush=True)
    except KeyboardInterrupt:
        print("interrupted: the crawl stops here")
    finally:
        for p in spiders:
            p.terminate()
            p.join(10)
        t = time.perf_counter()
        stop(frontier, timeout=3600)
        result["stop_s"] = time.perf_counter() - t
        server.stop()
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    result["checkpoints"] = rows
    return result
