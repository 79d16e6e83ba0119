#!/usr/bin/env bash
# PFADD to a dense HyperLogLog: the sketch made dense by 5,000 elements, then N PFADDs of
# random elements (redis-benchmark -r 100000000 PFADD hll __rand_int__) from 50 clients,
# 4 requests in flight each, against each tailstore binary (a fresh `serve --commit buffer`
# per run) and, for reference, Redis without persistence, in interleaved rounds. Prints
# requests per second and p50. Before decision 240 each PFADD that raised a register
# rewrote the whole 12,304-byte sketch.
# usage: bench/kv/pfadd.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT (tailstore; Redis gets PORT+1), N (PFADDs per run, default 200000)
ROUNDS=${1:?usage: pfadd.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults pfadd 7139
need redis-server; need redis-cli; need redis-benchmark
N=${N:-200000}
REDIS=$((PORT + 1))

trap 'stop_lone; stop_plain_redis' EXIT

# "PFADD RATE …; sketch LENGTH bytes" of one run against the server on $1.
pfadds() {
  redis-cli -p "$1" del hll >/dev/null
  redis-cli -p "$1" pfadd hll $(seq -f 'e%g' 5000) >/dev/null
  echo "PFADD $(benchmark -p "$1" -n "$N" -c 50 -P 4 -r 100000000 pfadd hll __rand_int__ | sed 's/.*: //');" \
    "sketch $(redis-cli -p "$1" strlen hll) bytes"
}

echo "== PFADD hll e1 … e5000, then redis-benchmark -p PORT -n $N -c 50 -P 4 -r 100000000 -q PFADD hll __rand_int__"
rounds_against_redis "$ROUNDS" pfadds "$@"
