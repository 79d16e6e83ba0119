#!/usr/bin/env bash
# Point reads that met a writer of their tree, per mix of SETs and GETs: for each tailstore
# binary, in interleaved rounds, a fresh `serve --commit buffer --threads LOOPS`, 10,000
# keys of 4 KiB written once, then `bench kv --clients 50 --threads CLIENT_THREADS --pipeline 4` for 5 s
# per SET:GET ratio. Prints ops/s and, per 1,000 commands, the optimistic descents that did
# not validate (`tailstore_read_retries`) and the reads that waited on the tree's latch
# (`tailstore_read_latched`), from `INFO stats` before and after each mix (decision 78).
# usage: bench/kv/read_contention.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT, LOOPS (event loops, default 2), CLIENT_THREADS (load threads of 50
# connections each, default 2; on a machine with many cores, enough to keep every loop busy)
ROUNDS=${1:?usage: read_contention.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults read-contention 7114
LOOPS=${LOOPS:-2}
CLIENT_THREADS=${CLIENT_THREADS:-2}

one_run() {
  local bin=$1 ratio before after ops
  stop_lone
  start_lone "$bin" serve --threads "$LOOPS"
  "$bin" bench kv --server "127.0.0.1:$PORT" --clients 50 --threads 1 --pipeline 4 --ratio 1:0 \
    --data-size 4096 --key-space 10000 --key-pattern sequential --requests 200 >/dev/null
  echo "$(basename "$bin"):"
  for ratio in 0:1 1:9 1:4 1:1 4:1; do
    read -r -a before <<<"$(read_counters)"
    ops=$("$bin" bench kv --server "127.0.0.1:$PORT" --clients 50 --threads "$CLIENT_THREADS" --pipeline 4 \
      --ratio "$ratio" --data-size 4096 --key-space 10000 --test-time 5 2>&1 | awk '/^Totals/ {print $2}')
    read -r -a after <<<"$(read_counters)"
    local commands=$((after[0] - before[0]))
    echo "    SET:GET $ratio  $ops ops/s  per 1,000 commands: retries" \
      "$(per_thousand $((after[1] - before[1])) "$commands"), latched reads" \
      "$(per_thousand $((after[2] - before[2])) "$commands")"
  done
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round ($(date -u +%H:%M) UTC)"
  for bin in "$@"; do one_run "$bin"; done
done
