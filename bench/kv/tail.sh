#!/usr/bin/env bash
# Throughput and tail latency of the bar's SET load from `tailstore bench kv` (exact timing,
# HdrHistogram: p50, p99, p99.9, max), for one or more configurations (a binary and serve
# options) in interleaved rounds: a fresh `serve --commit buffer` each run, every key of the
# key space (100,000) written once with 4 KiB values, then `bench kv --clients 25 --threads 2
# --pipeline 4 --ratio 1:0` for 5 s. Also prints the checkpoints the run took and the times
# writers waited for one at the bound on replay (INFO persistence). Compare a configuration
# without checkpoints within the run ("BIN --checkpoint-log 8GiB --max-replay 16GiB") to see
# what the checkpoints take from the loops.
# usage: bench/kv/tail.sh ROUNDS "BINARY [SERVE OPTIONS]"...   (env: WORK, PORT)
ROUNDS=${1:?usage: tail.sh ROUNDS \"BINARY [SERVE OPTIONS]\"...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults tail 7116
KEYS=100000

# A field of INFO persistence.
persistence() {
  redis-cli -p "$PORT" info persistence | tr -d '\r' | awk -F: -v k="$1" '$1 == k {print $2}'
}

one_run() {
  local bin args
  read -r bin args <<<"$1"
  stop_lone
  # shellcheck disable=SC2086 # the options are a list
  start_lone "$bin" serve $args
  "$bin" bench kv --server "127.0.0.1:$PORT" --clients 50 --threads 1 --pipeline 4 \
    --ratio 1:0 --data-size 4096 --key-space "$KEYS" --key-pattern sequential \
    --requests $((KEYS / 50)) >/dev/null
  local totals
  totals=$("$bin" bench kv --server "127.0.0.1:$PORT" --clients 25 --threads 2 --pipeline 4 \
    --ratio 1:0 --data-size 4096 --key-space "$KEYS" --test-time 5 2>&1 |
    awk '/^Totals/ {print $2 " SET/s, p50 " $7 " ms, p99 " $8 " ms, p99.9 " $9 " ms, max " $10 " ms"}')
  echo "    $1: ${totals:-(no result)}; checkpoints $(persistence tailstore_checkpoints)," \
    "waits at the bound $(persistence tailstore_checkpoint_room_waits)" \
    "($(persistence tailstore_checkpoint_room_wait_ms) ms)"
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round ($(date -u +%H:%M) UTC)"
  for config in "$@"; do one_run "$config"; done
done
