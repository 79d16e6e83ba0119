#!/usr/bin/env bash
# Reads of many elements at once: the LRANGE tests of redis-benchmark's default set (its
# LPUSH test fills one list, then LRANGE 0 99, 0 299, 0 499 and 0 599 of it), against each
# tailstore binary (a fresh `serve --commit buffer` per run) and, for reference, Redis without
# persistence, in interleaved rounds. Prints requests per second per test.
# usage: bench/kv/lrange.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT (tailstore; Redis gets PORT+1), N (requests per test, default 20000)
ROUNDS=${1:?usage: lrange.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults lrange 7117
need redis-server; need redis-cli; need redis-benchmark
N=${N:-20000}
REDIS=$((PORT + 1))
TESTS=lpush,lrange_100,lrange_300,lrange_500,lrange_600

trap 'stop_lone; stop_plain_redis' EXIT

# "LRANGE_100 RATE  LRANGE_300 RATE …" of one run of the tests against the server on $1.
rates() {
  redis-benchmark -p "$1" -t "$TESTS" -n "$N" -q 2>&1 | tr '\r' '\n' |
    awk '/^LRANGE.*requests per second/ {
      for (i = 1; i < NF; i++) if ($(i + 1) == "requests") printf "%s %s  ", $1, $i }'
}

echo "== redis-benchmark -p PORT -t $TESTS -n $N -q"
rounds_against_redis "$ROUNDS" rates "$@"
