#!/usr/bin/env bash
# Throughput of small-value SETs, binaries side by side on fresh `serve --commit buffer`
# servers, interleaved (decision 75): `redis-benchmark -t set -d 100 -r 100000 -n 3000000
# -c 50 -P 16 --threads 2` per round and binary, with the checkpoints the run took.
#   bench/kv/small_values.sh ROUNDS BINARY…
. "$(dirname "$0")/servers.sh"
need redis-cli; need redis-benchmark
lone_defaults small-values 7125
ROUNDS=$1; shift
for r in $(seq "$ROUNDS"); do for bin in "$@"; do
  start_lone "$bin" first
  rate=$(redis-benchmark -p "$PORT" -t set -d 100 -r 100000 -n 3000000 -c 50 -P 16 --threads 2 -q 2>&1 \
    | tr '\r' '\n' | grep -o 'SET: [0-9.]*' | tail -1)
  checkpoints=$(redis-cli -p "$PORT" info persistence | tr -d '\r' | grep -E '^tailstore_checkpoints:')
  echo "round $r $(basename "$bin"): $rate SET/s, $checkpoints"
  stop_lone
done; done
