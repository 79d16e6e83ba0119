#!/usr/bin/env bash
# Lua scripts against the three servers (Redis without persistence, Redis `appendfsync
# always`, `tailstore serve --commit buffer`), rounds interleaved: a script that writes two
# keys (a 100-byte SET and an INCR, the shape of a rate limiter or a lock with a counter),
# then the same two writes as plain commands for what the script itself costs, at the
# throughput settings of issue 6 (-c 50 -P 4 --threads 2) and at one client (-c 1 -P 1).
# usage: bench/kv/eval.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE, N)
BIN=${1:?usage: eval.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
WORK=${WORK:-/var/tmp/tailstore-eval}
BASE=${BASE:-7131}
N=${N:-300000}
. "$(dirname "$0")/servers.sh"
start_servers "$BIN"
SCRIPT="redis.call('set', KEYS[1], ARGV[1]) return redis.call('incr', KEYS[2])"
VALUE=$(printf 'v%.0s' $(seq 100))
KEYS_AND_VALUE=(2 "key:__rand_int__" "counter:__rand_int__" "$VALUE")
interleaved -r 100000 -c 50 -P 4 --threads 2 -n "$N" eval "$SCRIPT" "${KEYS_AND_VALUE[@]}"
interleaved -r 100000 -c 50 -P 4 --threads 2 -n "$N" set "key:__rand_int__" "$VALUE"
interleaved -r 100000 -c 50 -P 4 --threads 2 -n "$N" incr "counter:__rand_int__"
interleaved -r 100000 -c 1 -P 1 -n 20000 eval "$SCRIPT" "${KEYS_AND_VALUE[@]}"
