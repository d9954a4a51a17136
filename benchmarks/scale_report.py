"""Measuring and reporting for ``benchmarks/scale.py`` (see its docstring):
memory of a process from /proc, disk usage, the figures derived at a
checkpoint and the Markdown table."""

from __future__ import annotations

import os

MiB = 2**20


def memory(pid: int | str = "self") -> dict[str, int]:
    """Peak and current RSS of a process, split into anonymous, file-backed
    and shared memory (bytes, from /proc/PID/status)."""
    fields = {"VmHWM": "peak", "VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in fields:
                out[fields[key]] = int(value.split()[0]) * 1024
    return out


def disk_bytes(path: str) -> int:
    """Bytes allocated on disk under ``path`` (what ``du`` counts)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def derive(row: dict, prev: dict, timed: bool = True) -> None:
    """Rates and per-page figures of ``row`` against the previous checkpoint
    (``timed``: the frontier's own time is known)."""
    n, added = row["known"], row["known"] - prev["known"]
    pages = row["crawled"] - prev["crawled"]
    row["rate"] = pages / max(row["core"] - prev["core"], 1e-9) if timed else None
    row["rate_wall"] = pages / max(row["wall"] - prev["wall"], 1e-9)
    row["rss_per_page"] = row["rss"] / n
    row["peak_per_page"] = row["peak"] / n
    row["peak_anon_per_page"] = row["peak_anon"] / n
    row["anon_per_page"] = row["anon"] / n
    row["file_per_page"] = row["file"] / n
    row["marginal_rss"] = (row["rss"] - prev["rss"]) / max(added, 1)
    row["marginal_anon"] = (row["anon"] - prev["anon"]) / max(added, 1)
    row["marginal_file"] = (row["file"] - prev["file"]) / max(added, 1)
    if row.get("disk") is not None:
        row["disk_per_page"] = row["disk"] / n
    if "held_anon" in row:  # the memory held between rankings, against the last such sample before
        held_added = row["held_known"] - prev.get("held_known", prev["known"])
        row["held_per_page"] = row["held_anon"] / row["held_known"]
        row["marginal_held"] = (row["held_anon"] - prev.get("held_anon", prev["anon"])) / max(held_added, 1)


def progress_line(r: dict) -> str:
    rate = f"{r['rate']:,.0f} pages/s" if r.get("rate") else f"{r['rate_wall']:,.0f} pages/s (wall)"
    disk = f", disk {r['disk_per_page']:.0f} B/page" if "disk_per_page" in r else ""
    hosts = f", {r['hosts']:,} hosts" if "hosts" in r else ""
    deepest = f", depth {r['max_depth']}" if r.get("max_depth") else ""
    held = (f", held between rankings {r['held_per_page']:.0f} B/page (marginal {r['marginal_held']:.0f})"
            if "marginal_held" in r else "")
    return (f"{r['known']:>12,} known, {r['crawled']:>11,} crawled: {rate}, RSS {r['rss'] / MiB:,.0f} MiB "
            f"(anon {r['anon'] / MiB:,.0f}, file {r['file'] / MiB:,.0f}, peak {r['peak'] / MiB:,.0f}), "
            f"{r['rss_per_page']:.0f} B/page, marginal {r['marginal_rss']:.0f} B/page "
            f"(anon {r['marginal_anon']:.0f}){held}{disk}{hosts}{deepest}")


def _columns(rows: list[dict], mode: str) -> list[tuple[str, object]]:
    """(heading, row -> text) of the table for ``mode``."""
    first_rate = next((r["rate"] if r.get("rate") else r["rate_wall"] for r in rows), None)

    def rate(r):
        return r["rate"] if r.get("rate") else r["rate_wall"]

    who = "frontier process" if mode == "serve" else "process"
    cols = [("known pages", lambda r: f"{r['known']:,}"), ("crawled", lambda r: f"{r['crawled']:,}")]
    if mode != "generator":
        cols.append(("hosts", lambda r: f"{r['hosts']:,}"))
    cols += [
        ("pages/s" if mode == "core" else "pages/s (wall)", lambda r: f"{rate(r):,.0f}"),
        ("rate / first", lambda r: f"{rate(r) / first_rate:.2f}" if first_rate else "-"),
        (f"peak RSS of the {who}, MiB", lambda r: f"{r['peak'] / MiB:,.0f}"),
        ("peak anon MiB", lambda r: f"{r['peak_anon'] / MiB:,.0f}"),
        ("RSS MiB", lambda r: f"{r['rss'] / MiB:,.0f}"),
        ("anon MiB", lambda r: f"{r['anon'] / MiB:,.0f}"),
        ("file MiB", lambda r: f"{r['file'] / MiB:,.0f}"),
        ("peak B/page", lambda r: f"{r['peak_per_page']:.0f}"),
        ("RSS B/page", lambda r: f"{r['rss_per_page']:.0f}"),
        ("anon B/page", lambda r: f"{r['anon_per_page']:.0f}"),
        ("marginal RSS B/page", lambda r: f"{r['marginal_rss']:.0f}"),
        ("marginal anon B/page", lambda r: f"{r['marginal_anon']:.0f}"),
    ]
    if mode == "core":
        cols += [("held anon B/page", lambda r: f"{r['held_per_page']:.0f}" if "held_per_page" in r else "-"),
                 ("marginal held B/page", lambda r: f"{r['marginal_held']:.0f}" if "marginal_held" in r else "-")]
    if mode != "generator":
        cols.append(("disk B/page", lambda r: f"{r['disk_per_page']:.0f}" if "disk_per_page" in r else "-"))
    return cols


def table(rows: list[dict], mode: str) -> str:
    cols = _columns(rows, mode)
    lines = ["| " + " | ".join(h for h, _ in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(f(r) for _, f in cols) + " |" for r in rows]
    return "\n".join(lines)


def print_report(result: dict) -> None:
    rows, mode = result.get("checkpoints") or [], result["mode"]
    print()
    start = result.get("start")
    if start:
        what = {"serve": "before serve-frontier opened", "core": "before the frontier opened"}.get(mode, "at the start")
        print(f"RSS {what}: {start['rss'] / MiB:,.0f} MiB (anon {start['anon'] / MiB:,.0f}, "
              f"file {start['file'] / MiB:,.0f}); marginal figures of the first checkpoint count from there")
    resumed = result.get("resumed")
    if resumed:
        print(f"resumed at {resumed['known']:,} known pages: opened in {resumed['open_s']:.1f} s, RSS then "
              f"{resumed['rss'] / MiB:,.0f} MiB (anon {resumed['anon'] / MiB:,.0f}); the rows after it are that "
              "process's, their marginal figures count from there")
    if not rows:
        print("no checkpoint reached")
        return
    print()
    print(table(rows, mode))
    print()
    last = rows[-1]
    if mode == "generator":
        growth = (last["rss"] - rows[0]["rss"]) / MiB
        print(f"RSS from the first to the last checkpoint: {growth:+,.1f} MiB "
              f"(the web holds no memory per page; deepest page: depth {last['max_depth']})")
        return
    mismatch = [r for r in rows if r.get("predicted_known", r["known"]) != r["known"]]
    if mismatch:
        print(f"note: the frontier knew {mismatch[0]['known']:,} pages where the web predicts "
              f"{mismatch[0]['predicted_known']:,} (1 + 5 x crawled)")
    if last.get("max_depth"):
        print(f"deepest page crawled: depth {last['max_depth']}; rankings installed: {last['rankings']}")
    if "fp_lookups" in last:  # (the first checkpoint after a resume counts them from the reopening)
        added = last["known"] - (rows[-2]["known"] if len(rows) > 1 else 0)
        print(f"fingerprints looked up in the LMDB table over the last segment: {last['fp_lookups']:,} "
              f"({last['fp_lookups'] / max(added, 1):.2f} per page added)")
    if "close_s" in result:
        print(f"close (apply, final ranking, commit): {result['close_s']:.1f} s")
    if "after_close" in result:
        print(f"this process after the close: anon {result['after_close']['anon'] / MiB:,.0f} MiB")
    if "stop_s" in result:
        print(f"serve-frontier stopped (SIGTERM: commit, final ranking) in {result['stop_s']:.1f} s")
    ro = result.get("reopen")
    if ro:
        print(f"reopen in a new process: opened in {ro['open_s']:.2f} s, first batch of {ro['requests']} requests "
              f"after {ro['first_batch_s']:.2f} s; RSS then {ro['rss'] / MiB:,.0f} MiB "
              f"({ro['rss'] / ro['known']:.0f} B/page; anon {ro['anon'] / MiB:,.0f} MiB), close {ro['close_s']:.1f} s")
    if "check_s" in result:
        status = "all invariants hold" if result["check_status"] == 0 else f"exit {result['check_status']}"
        print(f"page_db_check: {result['check_s']:.1f} s ({status})")
        if result["check_status"]:
            print(result["check_output"])
    if "disk_after_close" in result:
        print(f"disk after close: {result['disk_after_close'] / MiB:,.0f} MiB "
              f"({result['disk_after_close'] / last['known']:.0f} B/page)")
