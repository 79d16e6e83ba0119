#!/usr/bin/env bash
# One-client 4 KiB SET latency at microsecond resolution (redis-benchmark's histogram has
# 8 µs buckets at this scale): `tailstore bench kv --clients 1` against Redis without
# persistence and tailstore `buffer`, rounds interleaved. Each server is first filled with
# every key the runs write (`key:0` … `key:99999`, the names `bench kv` uses), so that the
# measured SETs overwrite values, as the bar's `redis-benchmark -c 1` after its throughput
# runs does; inserts into a growing tree (new pages, splits) cost the server more.
# usage: bench/kv/latency.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE)
BIN=${1:?usage: latency.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
KEYS=100000
WORK=${WORK:-/var/tmp/tailstore-latency}
BASE=${BASE:-7101}
. "$(dirname "$0")/servers.sh"
start_servers "$BIN"
fill_bench_kv_keys "$BIN" "$KEYS" "$NONE" "$TAILSTORE"
echo "== tailstore bench kv --server 127.0.0.1:PORT --clients 1 --threads 1 --pipeline 1 --ratio 1:0 --data-size 4096 --key-space $KEYS --test-time 4 (after every key was written once)"
for r in $(seq "$ROUNDS"); do for p in $NONE $TAILSTORE; do
  line=$("$BIN" bench kv --server "127.0.0.1:$p" --clients 1 --threads 1 --pipeline 1 \
    --ratio 1:0 --data-size 4096 --key-space "$KEYS" --test-time 4 2>&1 | awk '/^Totals/ {print "avg " $6 " ms, p50 " $7 " ms, p99 " $8 " ms"}')
  echo "round $r port $p: $line"
done; done
