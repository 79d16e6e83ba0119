#!/usr/bin/env bash
# The bars of issue 6, all three servers in one session, rounds interleaved:
#   4 KiB SETs, -c 50 -P 4 --threads 2 (throughput), -c 1 -P 1 (latency), and
#   redis-benchmark's default test set against tailstore.
# The throughput runs send 1,000,000 SETs: with --threads, redis-benchmark notices the end of
# a run on its 250 ms progress timer, so a run's time (and its requests per second) is
# rounded up to the next quarter second; a 200,000-SET run of Redis without persistence
# (~0.9 s) read as 159,744 or 199,800 instead of ~220,000. At 1,000,000 the rounding costs
# at most 5% of a ~4.5 s run.
# The throughput load is then run again from `tailstore bench kv` (exact timing), as a check
# on redis-benchmark's figures.
# usage: bench/kv/bars.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE)
BIN=${1:?usage: bars.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
WORK=${WORK:-/var/tmp/tailstore-bars}
BASE=${BASE:-7101}
. "$(dirname "$0")/servers.sh"
start_servers "$BIN"
interleaved -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2 -n 1000000
# The same load from our own generator, which times its runs exactly: 2 threads of 25
# connections, 4 requests in flight each, 4 KiB SETs over 100,000 keys (written once first).
fill_bench_kv_keys "$BIN" 100000 "$NONE" "$ALWAYS" "$TAILSTORE"
echo "== tailstore bench kv --server 127.0.0.1:PORT --clients 25 --threads 2 --pipeline 4 --ratio 1:0 --data-size 4096 --key-space 100000 --test-time 5"
for r in $(seq "$ROUNDS"); do for p in $NONE $ALWAYS $TAILSTORE; do
  settled=$(settle)
  line=$("$BIN" bench kv --server "127.0.0.1:$p" --clients 25 --threads 2 --pipeline 4 \
    --ratio 1:0 --data-size 4096 --key-space 100000 --test-time 5 2>&1 |
    awk '/^Totals/ {print $2 " SET/s, p50 " $7 " ms, p99 " $8 " ms"}')
  echo "round $r port $p (settled in $settled): ${line:-(no result)}"
done; done
interleaved -t set -d 4096 -r 100000 -c 1 -P 1 -n 50000
echo "== redis-benchmark -p $TAILSTORE -q -n 20000 (the default test set; settled in $(settle))"
set +e
redis-benchmark -p "$TAILSTORE" -q -n 20000 2>&1 | tr '\r' '\n' | grep -E "requests per|rror"
echo "exit code ${PIPESTATUS[0]}"
