#!/usr/bin/env bash
# One-client 4 KiB SET latency at microsecond resolution (redis-benchmark's histogram has
# 8 µs buckets at this scale): `tailstore bench kv --clients 1` against Redis without
# persistence and tailstore `buffer`, after a 100,000-SET fill of each, rounds interleaved.
# usage: bench/kv/latency.sh TAILSTORE_BINARY [ROUNDS] [FILL_SETS]   (env: WORK, BASE)
BIN=${1:?usage: latency.sh TAILSTORE_BINARY [ROUNDS] [FILL_SETS]}
ROUNDS=${2:-3}
FILL=${3:-100000}
WORK=${WORK:-/var/tmp/tailstore-latency}
BASE=${BASE:-7101}
. "$(dirname "$0")/servers.sh"
start_servers "$BIN"
for p in $NONE $TAILSTORE; do
  redis-benchmark -p "$p" -t set -d 4096 -r 100000 -c 50 -P 4 -n "$FILL" -q >/dev/null 2>&1
done
echo "== tailstore bench kv --server 127.0.0.1:PORT --clients 1 --threads 1 --pipeline 1 --ratio 1:0 --data-size 4096 --key-space 100000 --test-time 4"
for r in $(seq "$ROUNDS"); do for p in $NONE $TAILSTORE; do
  line=$("$BIN" bench kv --server "127.0.0.1:$p" --clients 1 --threads 1 --pipeline 1 \
    --ratio 1:0 --data-size 4096 --key-space 100000 --test-time 4 2>&1 | awk '/^Totals/ {print "avg " $6 " ms, p50 " $7 " ms, p99 " $8 " ms"}')
  echo "round $r port $p: $line"
done; done
