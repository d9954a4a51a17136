"""A crawl through LinkRankBackend that a test kills with SIGKILL.

Usage: crash_child.py DB PROGRESS N

Crawls a synthetic web of N pages (page p links to 5p+1..5p+5 and to three
earlier pages, all below N). After every get_next_requests (which commits)
it appends one JSON line to PROGRESS: the pages whose page_crawled happened
before that commit, and the pages it leased. It writes "DONE" when the
frontier is exhausted.
"""

import json
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from frontera_linkrank import LinkRankBackend  # noqa: E402
from util import crawl, req  # noqa: E402

db, progress, n = sys.argv[1], sys.argv[2], int(sys.argv[3])


def url(p):
    return f"http://h{p % 11}.test/{p}"


def links(p):
    out = [q for q in range(5 * p + 1, 5 * p + 6) if q < n]
    return out + [(p * 7 + k * 13) % max(p, 1) for k in range(3)]


b = LinkRankBackend(settings={"LINKRANK_PATH": db, "LINKRANK_SYNC": True, "LINKRANK_COMMIT_PAGES": 10**6})
b.add_seeds([req(url(0))])
out = open(progress, "a")
done_since_commit = []
while True:
    reqs = b.get_next_requests(25)
    out.write(json.dumps({"crawled": done_since_commit, "leased": [r.url for r in reqs]}) + "\n")
    out.flush()
    done_since_commit = []
    if not reqs:
        if b.finished():
            break
        continue
    for r in reqs:
        p = int(r.url.rsplit("/", 1)[1])
        crawl(b, r, [url(q) for q in links(p)])
        done_since_commit.append(r.url)
        time.sleep(0.001)  # so that a kill usually lands mid-batch
b.frontier_stop()
out.write("DONE\n")
out.flush()
