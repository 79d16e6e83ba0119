#!/usr/bin/env bash
# Server CPU per 4 KiB SET of `tailstore serve --commit buffer`, by thread (the event loop,
# the checkpointer, the log writer), and SET/s, for one or more tailstore binaries in
# interleaved rounds: a fresh server each run, 200,000 SETs measured from the start
# (redis-benchmark -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2), CPU time from
# /proc/PID/task/*/stat (user + system). Compare medians over several rounds: one run
# varies by ±15% on a shared machine.
# usage: bench/kv/cpu.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, PORT)
ROUNDS=${1:?usage: cpu.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults cpu 7112
N=200000
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# CPU ticks (user + system) a thread has used, from its /proc directory $1.
cpu_ticks() { awk '{print $14 + $15}' "$1/stat"; }

one_run() {
  local bin=$1
  stop_lone
  start_lone "$bin" serve
  by_thread "$LONE" cpu_ticks >"$WORK/before"
  local result
  result=$(redis-benchmark -p "$PORT" -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2 -n "$N" -q 2>&1 |
    tr '\r' '\n' | grep 'requests per')
  by_thread "$LONE" cpu_ticks >"$WORK/after"
  echo "$(basename "$bin"): $result"
  per_op "$WORK/before" "$WORK/after" "$N" "$TICK_US" µs/SET
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  for bin in "$@"; do one_run "$bin"; done
done
