#!/usr/bin/env bash
# Random members of a large set: a set filled with about MEMBERS random members (redis-benchmark
# SADD s __rand_int__), a sorted set likewise (ZADD z __rand_int__ __rand_int__) and a hash
# (HSET h __rand_int__ __rand_int__), then OPS SRANDMEMBERs, OPS SPOPs, OPS ZRANDMEMBERs and
# OPS HRANDFIELDs of one member, one client, one at a time, against each tailstore binary (a
# fresh `serve --commit buffer` per run) and, for reference, Redis without persistence, in
# interleaved rounds. Prints the collections' sizes and the requests per second and p50 of
# each. Before decision 237 (HRANDFIELD: 239) each read every member of the collection.
# usage: bench/kv/spop.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT (tailstore; Redis gets PORT+1), MEMBERS (default 200000), OPS (default 200)
ROUNDS=${1:?usage: spop.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults spop 7119
need redis-server; need redis-cli; need redis-benchmark
MEMBERS=${MEMBERS:-200000}
OPS=${OPS:-200}
REDIS=$((PORT + 1))

trap 'stop_lone; stop_plain_redis' EXIT

# "N, M and K members; SRANDMEMBER RATE …; SPOP RATE …; ZRANDMEMBER RATE …; HRANDFIELD RATE …"
# of one run against the server on $1.
picks() {
  redis-cli -p "$1" del s z h >/dev/null
  redis-benchmark -q -p "$1" -n "$MEMBERS" -r 1000000000 -P 16 sadd s __rand_int__ >/dev/null 2>&1
  redis-benchmark -q -p "$1" -n "$MEMBERS" -r 1000000000 -P 16 zadd z __rand_int__ __rand_int__ \
    >/dev/null 2>&1
  redis-benchmark -q -p "$1" -n "$MEMBERS" -r 1000000000 -P 16 hset h __rand_int__ __rand_int__ \
    >/dev/null 2>&1
  echo "$(redis-cli -p "$1" scard s), $(redis-cli -p "$1" zcard z) and $(redis-cli -p "$1" hlen h) members;" \
    "SRANDMEMBER $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 srandmember s | sed 's/.*: //');" \
    "SPOP $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 spop s | sed 's/.*: //');" \
    "ZRANDMEMBER $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 zrandmember z | sed 's/.*: //');" \
    "HRANDFIELD $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 hrandfield h | sed 's/.*: //')"
}

echo "== SADD s __rand_int__, ZADD z __rand_int__ __rand_int__ and HSET h __rand_int__" \
  "__rand_int__ x $MEMBERS, then redis-benchmark -p PORT -n $OPS -c 1 -P 1 -q SRANDMEMBER s," \
  "SPOP s, ZRANDMEMBER z, HRANDFIELD h"
rounds_against_redis "$ROUNDS" picks "$@"
