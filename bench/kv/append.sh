#!/usr/bin/env bash
# A string built by APPENDs: N APPENDs of a 1,000-byte value to one key, one client, one at a
# time (redis-benchmark -n N -c 1 -P 1 APPEND k VALUE), against each tailstore binary (a
# fresh `serve --commit buffer` per run) and, for reference, Redis without persistence, in
# interleaved rounds. Prints requests per second and p50. Before decision 235 an APPEND
# rewrote the whole string, so the rate fell with the string's length.
# usage: bench/kv/append.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT (tailstore; Redis gets PORT+1), N (APPENDs per run, default 4000)
ROUNDS=${1:?usage: append.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults append 7118
need redis-server; need redis-cli; need redis-benchmark
N=${N:-4000}
REDIS=$((PORT + 1))
VALUE=$(head -c 1000 /dev/zero | tr '\0' x)

trap 'stop_lone; stop_plain_redis' EXIT

# "RATE requests per second, p50=… (LENGTH bytes)" of one run against the server on $1.
appends() {
  redis-cli -p "$1" del k >/dev/null
  echo "$(benchmark -p "$1" -n "$N" -c 1 -P 1 append k "$VALUE" | sed 's/.*: //') ($(redis-cli -p "$1" strlen k) bytes)"
}

echo "== redis-benchmark -p PORT -n $N -c 1 -P 1 -q APPEND k <1,000 bytes>"
rounds_against_redis "$ROUNDS" appends "$@"
