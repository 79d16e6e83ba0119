#!/usr/bin/env bash
# What clients waiting in blocking commands cost an idle server: for each tailstore binary
# (a fresh `serve --commit buffer` each), CLIENTS clients block in BLPOP, BZPOPMIN and
# XREAD BLOCK on keys no one writes for SECONDS, and the server's CPU time over that
# stretch is printed with its blocking-command runs (INFO stats). A waiting client should
# cost nothing until a write to its keys or its deadline (decision 124).
# usage: bench/kv/blocked_cpu.sh TAILSTORE_BINARY...   (env: WORK, PORT, CLIENTS, BLOCKED_SECONDS)
[ $# -ge 1 ] || { echo "usage: blocked_cpu.sh TAILSTORE_BINARY..." >&2; exit 2; }
. "$(dirname "$0")/servers.sh"
lone_defaults blocked_cpu 7131
need redis-cli
CLIENTS=${CLIENTS:-3}
SECONDS_BLOCKED=${BLOCKED_SECONDS:-3}

runs() { redis-cli -p "$PORT" info stats | tr -d '\r' | awk -F: '/^tailstore_blocking_runs:/ {print $2}'; }

for bin in "$@"; do
  start_lone "$bin" serve
  before=$(cpu_ticks "/proc/$LONE")
  runs_before=$(runs)
  waiting=()
  for c in $(seq "$CLIENTS"); do
    case $((c % 3)) in
      0) redis-cli -p "$PORT" blpop "idle-list-$c" "$SECONDS_BLOCKED" >/dev/null & ;;
      1) redis-cli -p "$PORT" bzpopmin "idle-zset-$c" "$SECONDS_BLOCKED" >/dev/null & ;;
      2) redis-cli -p "$PORT" xread block $((SECONDS_BLOCKED * 1000)) streams "idle-stream-$c" '$' >/dev/null & ;;
    esac
    waiting+=($!)
  done
  wait "${waiting[@]}"
  after=$(cpu_ticks "/proc/$LONE")
  ticks=$((after - before))
  echo "$(basename "$bin"): $CLIENTS clients blocked for ${SECONDS_BLOCKED} s: server CPU" \
    "$(awk -v t="$ticks" -v s="$SECONDS_BLOCKED" 'BEGIN { printf "%.2f s (%.0f%% of a core)", t / 100, t / s }'),"\
    "$(( $(runs) - runs_before )) blocking-command runs"
  stop_lone
done
