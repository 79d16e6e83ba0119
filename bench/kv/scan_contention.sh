#!/usr/bin/env bash
# Scans beside writers of the same table: for each tailstore binary, in interleaved rounds, a
# fresh `serve --commit buffer --threads LOOPS`, LISTS lists of 100 elements (RPUSH), then
# for DURATION seconds two redis-benchmark loads at once: RPUSH to random lists (the writers) and
# LRANGE 0 99 of random lists (each a range scan of the lists' table; the readers). Prints
# both loads' requests per second and, per 1,000 commands, the descents that did not
# validate (`tailstore_read_retries`) and the reads (point reads, or scans' leaves) that
# waited on the tree's latch (`tailstore_read_latched`), from `INFO stats` (decision 87).
# usage: bench/kv/scan_contention.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT, LOOPS (default 2), LISTS (default 1000), DURATION (seconds, default 5)
ROUNDS=${1:?usage: scan_contention.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults scan-contention 7115
LOOPS=${LOOPS:-2}
LISTS=${LISTS:-1000}
DURATION=${DURATION:-5}

# A redis-benchmark load of command $@ on random lists for DURATION seconds, its progress lines
# to file $1 (it is stopped then; SIGTERM, since a background job ignores SIGINT).
load() {
  local out=$1
  shift
  timeout "$DURATION" redis-benchmark -p "$PORT" -c 25 -r "$LISTS" -n 100000000 "$@" \
    >"$out" 2>&1
}

one_run() {
  local bin=$1 before after writer
  stop_lone
  start_lone "$bin" serve --threads "$LOOPS"
  for i in $(seq 0 $((LISTS - 1))); do
    echo "RPUSH list:$(printf '%012d' "$i") $(seq -s ' ' 1 100)"
  done | redis-cli -p "$PORT" >/dev/null
  read -r -a before <<<"$(read_counters)"
  load "$WORK/writes" RPUSH list:__rand_int__ element &
  writer=$!
  load "$WORK/reads" LRANGE list:__rand_int__ 0 99 || true
  wait "$writer" || true
  read -r -a after <<<"$(read_counters)"
  local commands=$((after[0] - before[0]))
  echo "$(basename "$bin"): LRANGE 0 99 $(rate_of "$WORK/reads")/s beside RPUSH" \
    "$(rate_of "$WORK/writes")/s; per 1,000 commands: retries" \
    "$(per_thousand $((after[1] - before[1])) "$commands"), latched reads" \
    "$(per_thousand $((after[2] - before[2])) "$commands")"
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round ($(date -u +%H:%M) UTC)"
  for bin in "$@"; do one_run "$bin"; done
done
