#!/usr/bin/env bash
# Event loops against workloads (decision 104): for each round, each workload and each count
# of loops in LOOP_COUNTS, a fresh `serve --commit buffer --threads LOOPS`, every key of the
# key space (100,000) written once with the workload's value size, then `bench kv --clients
# 25 --threads 2 --pipeline 4` for 4 s. Workloads: 16-byte SETs, and 4 KiB values at SET:GET
# 1:0, 1:1, 1:4 and 0:1. Prints ops/s per run; compare medians over the rounds (one run
# varies by ±15% on a shared machine).
# usage: bench/kv/loops.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, PORT, LOOP_COUNTS="1 2")
BIN=${1:?usage: loops.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
. "$(dirname "$0")/servers.sh"
lone_defaults loops 7115
LOOP_COUNTS=${LOOP_COUNTS:-1 2}
KEYS=100000
CLIENTS=25
THREADS=2

# ops/s of one fresh server with $1 loops, $2-byte values, SET:GET $3.
one_run() {
  local loops=$1 size=$2 ratio=$3
  stop_lone
  start_lone "$BIN" serve --threads "$loops"
  # Sequential keys: each thread walks its slice, --requests per connection covers it once.
  "$BIN" bench kv --server "127.0.0.1:$PORT" --clients "$CLIENTS" --threads "$THREADS" \
    --pipeline 4 --ratio 1:0 --data-size "$size" --key-space "$KEYS" --key-pattern sequential \
    --requests $((KEYS / (CLIENTS * THREADS))) >/dev/null
  "$BIN" bench kv --server "127.0.0.1:$PORT" --clients "$CLIENTS" --threads "$THREADS" \
    --pipeline 4 --ratio "$ratio" --data-size "$size" --key-space "$KEYS" --test-time 4 2>&1 |
    awk '/^Totals/ {print $2}'
}

echo "machine: $(nproc) processors; $("$BIN" --version 2>/dev/null || echo "$BIN")"
for round in $(seq "$ROUNDS"); do
  echo "== round $round ($(date -u +%H:%M) UTC)"
  for workload in "16 1:0" "4096 1:0" "4096 1:1" "4096 1:4" "4096 0:1"; do
    read -r size ratio <<<"$workload"
    line="    ${size}-byte values, SET:GET $ratio:"
    for loops in $LOOP_COUNTS; do
      line+="  $loops loop(s) $(one_run "$loops" "$size" "$ratio") ops/s"
    done
    echo "$line"
  done
done
