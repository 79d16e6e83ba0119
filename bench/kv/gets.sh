#!/usr/bin/env bash
# Throughput of small-value GETs, binaries side by side on fresh `serve --commit buffer`
# servers, interleaved (decision 174: each GET's read lookup is counted for INFO): 100,000
# keys of 64 bytes written once (`redis-benchmark -t set -d 64 -r 100000 -n 300000`), then
# `redis-benchmark -t get -d 64 -r 100000 -n 2000000 -c 50 -P 16 --threads 2` per round
# and binary, with the server's CPU (all threads) per GET: redis-benchmark rounds a run's
# time up to a quarter second, so its rates come in steps (~5% apart here); the CPU is the
# finer measure.
#   bench/kv/gets.sh ROUNDS BINARY…
. "$(dirname "$0")/servers.sh"
need redis-cli; need redis-benchmark
lone_defaults gets 7126
ROUNDS=${1:?usage: gets.sh ROUNDS BINARY...}; shift
for r in $(seq "$ROUNDS"); do for bin in "$@"; do
  start_lone "$bin" first
  redis-benchmark -p "$PORT" -t set -d 64 -r 100000 -n 300000 -c 50 -P 16 -q >/dev/null 2>&1
  before=$(cpu_ticks "/proc/$LONE")
  rate=$(redis-benchmark -p "$PORT" -t get -d 64 -r 100000 -n 2000000 -c 50 -P 16 --threads 2 -q 2>&1 |
    tr '\r' '\n' | grep 'requests per' | tail -1)
  ticks=$(($(cpu_ticks "/proc/$LONE") - before))
  # The server's CPU (all threads, user and system) per GET.
  per_get=$(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz * 1e6 / 2000000 }')
  hits=$(redis-cli -p "$PORT" info stats | tr -d '\r' | { grep -E '^keyspace_(hits|misses):' || true; } | tr '\n' ' ')
  echo "round $r $(basename "$bin"): ${rate:-(no result)}, server CPU ${per_get} µs/GET ${hits}"
  stop_lone
done; done
