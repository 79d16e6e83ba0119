#!/usr/bin/env bash
# Server CPU per 4 KiB SET of `tailstore serve --commit buffer`, by thread (the event loop,
# the checkpointer, the log writer), with each thread's share of a core, SET/s, and the pages
# the run wrote to the data file with the checkpointer's CPU per page, for one
# or more tailstore binaries in interleaved rounds: a fresh server each run, 200,000 SETs
# measured (redis-benchmark -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2), CPU time from
# /proc/PID/task/*/stat (user + system). Compare medians over several rounds: one run
# varies by ±15% on a shared machine. (The "% of a core" figures divide by the run's wall time,
# which redis-benchmark --threads rounds up to a quarter second: up to ~7% low at 200,000 SETs.)
# usage: bench/kv/cpu.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT; FILL=1 runs the same load once, unmeasured, before the measured one (so
# that the measured SETs overwrite keys instead of creating them); SERVE_ARGS are added to
# `serve`'s options (e.g. SERVE_ARGS="--checkpoint-log 8GiB --max-replay 16GiB": no
# checkpoint within the run; SERVE_ARGS="--threads 1": one event loop); N SETs per run
# (default 200,000); THREADS redis-benchmark threads of 25 connections each (default 2: the
# bar's load; on a machine with many cores, THREADS=8 N=1000000 loads every event loop);
# CHECKPOINTER_PRIORITY, a command given the checkpointer thread's id once the server is up
# (e.g. "chrt -i -p 0" for SCHED_IDLE, "renice -n 19 -p"). Each thread's share of the run
# spent waiting to run and its time slices come from /proc/PID/task/*/schedstat.
ROUNDS=${1:?usage: cpu.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults cpu 7112
N=${N:-200000}
THREADS=${THREADS:-2}
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# Pages the server has written to its data file (checkpoints and evictions).
pages_written() {
  redis-cli -p "$PORT" info stats | tr -d '\r' | awk -F: '/^tailstore_pages_written:/ {print $2}'
}

# Nanoseconds a thread has waited to run, and its time slices, from its /proc directory $1.
run_wait_ns() { awk '{print $2}' "$1/schedstat"; }
time_slices() { awk '{print $3}' "$1/schedstat"; }

# Applies CHECKPOINTER_PRIORITY to the lone server's checkpointer thread, if it is set.
prioritize_checkpointer() {
  [ -n "${CHECKPOINTER_PRIORITY:-}" ] || return 0
  local task
  for task in /proc/"$LONE"/task/*; do
    # shellcheck disable=SC2086 # the setting is a command and its options
    [ "$(cat "$task/comm")" = tailstore-check ] && $CHECKPOINTER_PRIORITY "${task##*/}" >/dev/null
  done
  return 0
}

load() {
  redis-benchmark -p "$PORT" -t set -d 4096 -r 100000 -c $((25 * THREADS)) -P 4 \
    --threads "$THREADS" -n "$N" -q 2>&1 |
    tr '\r' '\n' | grep 'requests per'
}

one_run() {
  local bin=$1 result began ended
  stop_lone
  # shellcheck disable=SC2086 # SERVE_ARGS is a list of options
  start_lone "$bin" serve ${SERVE_ARGS:-}
  prioritize_checkpointer
  [ "${FILL:-0}" = 1 ] && load >/dev/null
  by_thread "$LONE" cpu_ticks >"$WORK/before"
  by_thread "$LONE" run_wait_ns >"$WORK/wait-before"
  by_thread "$LONE" time_slices >"$WORK/slices-before"
  pages_before=$(pages_written)
  began=$(date +%s%N)
  result=$(load)
  ended=$(date +%s%N)
  by_thread "$LONE" cpu_ticks >"$WORK/after"
  by_thread "$LONE" run_wait_ns >"$WORK/wait-after"
  by_thread "$LONE" time_slices >"$WORK/slices-after"
  pages=$(($(pages_written) - pages_before))
  echo "$(basename "$bin"): $result"
  per_op "$WORK/before" "$WORK/after" "$N" "$TICK_US" µs/SET
  echo "    pages written      $(per_thousand "$pages" "$N") per 1,000 SETs"
  if [ "$pages" -gt 0 ]; then
    per_op "$WORK/before" "$WORK/after" "$pages" "$TICK_US" µs/page | grep tailstore-check || true
  fi
  per_op "$WORK/before" "$WORK/after" "$(((ended - began) / 1000))" "$((TICK_US * 100))" \
    "% of a core" | grep -v 'all threads'
  per_op "$WORK/wait-before" "$WORK/wait-after" "$((ended - began))" 100 \
    "% of the run waiting to run" | grep -v 'all threads'
  per_op "$WORK/slices-before" "$WORK/slices-after" 1 1 "time slices" | grep -v 'all threads'
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  for bin in "$@"; do one_run "$bin"; done
done
