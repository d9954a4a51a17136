#!/bin/sh
# `make demo`: serve the Hollins web graph (`hollins`, shipped with the
# package in frontera_linkrank/data/hollins) on 127.0.0.1 as an HTTP proxy,
# crawl it with `scrapy crawl example` through that local web, print the 20
# most important pages (by the PageRank the crawl computed), stop the web. Run from the repository root; nothing
# leaves the machine.
set -eu
BIN=${BIN:-.venv/bin}
ROOT=$(pwd)
work=$(mktemp -d)
web=
cleanup() {
    if [ -n "$web" ]; then kill "$web" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The local web stops by itself after 240 s at the latest.
"$BIN/frontera-linkrank" serve-web hollins --errors 0.01 --redirects 0.01 \
    --port-file "$work/port" --timeout 240 > "$work/web.log" 2>&1 &
web=$!
i=0
while [ ! -s "$work/port" ]; do
    i=$((i + 1))
    if [ "$i" -gt 300 ] || ! kill -0 "$web" 2>/dev/null; then
        cat "$work/web.log" >&2
        echo "demo: the local web did not start" >&2
        exit 1
    fi
    sleep 0.1
done
port=$(cat "$work/port")
cat "$work/web.log"

rm -rf example_project/crawl_db
(cd example_project && http_proxy="http://127.0.0.1:$port" "$ROOT/$BIN/scrapy" crawl example)

echo
"$BIN/frontera-linkrank" top example_project/crawl_db -n 20 --by pagerank
