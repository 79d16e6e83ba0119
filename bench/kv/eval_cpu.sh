#!/usr/bin/env bash
# The server CPU a Lua script costs, binaries compared: for each round and each binary, a
# fresh `tailstore serve --commit buffer` runs N of eval.sh's script (a 100-byte SET and an
# INCR on random keys) from redis-benchmark (-c 50 -P 4 --threads 2); prints the rate and the
# server's CPU time (user + system, all threads) per script.
# usage: bench/kv/eval_cpu.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, PORT, N)
ROUNDS=${1:?usage: eval_cpu.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults eval-cpu 7135
need redis-cli; need redis-benchmark
N=${N:-300000}
SCRIPT="redis.call('set', KEYS[1], ARGV[1]) return redis.call('incr', KEYS[2])"
VALUE=$(printf 'v%.0s' $(seq 100))
TICK_US=$((1000000 / $(getconf CLK_TCK)))
echo "== redis-benchmark -q -r 100000 -c 50 -P 4 --threads 2 -n $N eval \"$SCRIPT\" 2 key:__rand_int__ counter:__rand_int__ <100 bytes>"
for round in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    start_lone "$bin" serve
    before=$(cpu_ticks "/proc/$LONE")
    rate=$(benchmark -p "$PORT" -r 100000 -c 50 -P 4 --threads 2 -n "$N" eval "$SCRIPT" 2 \
      "key:__rand_int__" "counter:__rand_int__" "$VALUE")
    after=$(cpu_ticks "/proc/$LONE")
    echo "round $round $(basename "$bin"): ${rate##*: }, server CPU $(awk -v t=$((after - before)) \
      -v us="$TICK_US" -v n="$N" 'BEGIN { printf "%.2f", t * us / n }') µs per script"
    stop_lone
  done
done
