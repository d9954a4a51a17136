"""The dashboard's sample in the Prometheus text exposition format (0.0.4):
``serve-status``' ``/metrics`` (docs/dashboard.md lists the metrics)."""

from __future__ import annotations

from typing import Any


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def metrics(doc: dict[str, Any]) -> str:  # long: one block per metric family, read straight down
    """The sample in the Prometheus text exposition format (0.0.4)."""
    out: list[str] = []

    def family(name: str, kind: str, helptext: str, rows: list[tuple[dict[str, object], Any]]) -> None:
        rows = [(labels, v) for labels, v in rows if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not rows:
            return
        out.append(f"# HELP linkrank_{name} {helptext}")
        out.append(f"# TYPE linkrank_{name} {kind}")
        for labels, v in rows:
            text = ",".join(f'{k}="{_label(x)}"' for k, x in labels.items())
            value = str(v) if isinstance(v, int) else repr(float(v))
            out.append(f"linkrank_{name}{{{text}}} {value}" if text else f"linkrank_{name} {value}")

    p = doc.get("progress") or {}
    family("pages_known", "gauge", "Pages of the page database.", [({}, p.get("known"))])
    family("pages", "gauge", "Pages by state: crawled, queued, in_flight (leased), errors (given up).",
           [({"state": k}, p.get(k)) for k in ("crawled", "queued", "in_flight", "errors")])
    family("max_pages", "gauge", "The crawl's page budget.", [({}, p.get("max_pages"))])
    family("crawl_rate", "gauge", "Pages crawled per second over the last minute.", [({}, p.get("rate"))])
    family("eta_seconds", "gauge", "Seconds until the budget (or the queue) is done at the current rate.",
           [({}, p.get("eta_seconds"))])
    family("fetched_pagerank", "gauge", "Share of the last PageRank of known pages already fetched.",
           [({}, p.get("fetched_pagerank"))])
    db = doc.get("database")
    if db:
        s = db["summary"]
        family("links", "gauge", "Stored links.", [({}, s["links"])])
        family("status_age_seconds", "gauge", "Seconds between the last commit and the status figures it holds.",
               [({}, None if db["committed"] is None or db["status_time"] is None
                 else db["committed"] - db["status_time"])])
        family("hosts", "gauge", "Known hosts.", [({}, s["hosts"])])
        family("counter_total", "counter", "The crawl's counters (page database).",
               [({"name": k}, v) for k, v in sorted(s["counters"].items())])
        family("http_responses_total", "counter", "Responses with this status (>= 400).",
               [({"status": k}, v) for k, v in db["by_status"].items()])
        family("failed_fetches_total", "counter", "Failed fetches, by kind (the exception's name).",
               [({"reason": k}, v) for k, v in db["by_reason"].items()])
        family("rejected_urls_total", "counter", "URLs rejected, by reason.",
               [({"reason": k}, v) for k, v in db["rejected"].items()])
        family("cash_residual", "gauge", "AOPIC cash invariant residual.", [({}, (s["cash"] or {}).get("residual"))])
    shared = doc.get("shared")
    if shared:
        family("frontier_state_age_seconds", "gauge", "Seconds since the shared frontier last updated its state.",
               [({}, shared.get("state_age"))])
        family("frontier_stat", "gauge", "The shared frontier's own figures.",
               [({"name": k}, v) for k, v in sorted((shared.get("stats") or {}).items())])
        family("stream", "gauge", "Broker streams: report log length and pending, feed entries.",
               [({"name": k}, v) for k, v in sorted((shared.get("backlog") or {}).items())]
               + [({"name": "feed_entries"}, shared.get("feed_entries")),
                  ({"name": "feed_pending"}, shared.get("feed_pending"))])
        spiders = sorted((shared.get("spiders") or {}).items())
        for key, what in (("alive", "1 if the spider's heartbeat is current"), ("partitions", "Partitions held"),
                          ("hosts", "Hosts served"), ("fetched", "Pages fetched"), ("rate", "Pages a second")):
            family(f"spider_{key}", "gauge", f"{what}, per spider.",
                   [({"spider": sid}, float(s.get(key)) if key == "alive" else s.get(key)) for sid, s in spiders])
    family("sample_timestamp_seconds", "gauge", "When this sample was read (UNIX seconds).", [({}, doc.get("time"))])
    family("sample_problems", "gauge", "Parts of the crawl that could not be read at the last sample.",
           [({}, len(doc.get("problems") or []))])
    return "\n".join(out) + "\n"
