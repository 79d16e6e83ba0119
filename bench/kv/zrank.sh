#!/usr/bin/env bash
# Ranks and counts in a large sorted set: a sorted set filled with about MEMBERS random
# members (redis-benchmark ZADD z __rand_int__ __rand_int__), then OPS of each of ZRANK and
# ZREVRANK of its middle member, ZCOUNT of all of it, ZRANGE of ten members at the middle
# rank, ZRANGEBYSCORE with LIMIT at the middle offset and ZLEXCOUNT of all of it, one client,
# one at a time, against each tailstore binary (a fresh `serve --commit buffer` per run) and,
# for reference, Redis without persistence, in interleaved rounds. Prints the set's size and
# the requests per second and p50 of each. Before decision 238 each read the members before
# the rank (or in the count) one by one.
# usage: bench/kv/zrank.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT (tailstore; Redis gets PORT+1), MEMBERS (default 1000000), OPS (default 100)
ROUNDS=${1:?usage: zrank.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults zrank 7129
need redis-server; need redis-cli; need redis-benchmark
MEMBERS=${MEMBERS:-1000000}
OPS=${OPS:-100}
REDIS=$((PORT + 1))

trap 'stop_lone; stop_plain_redis' EXIT

# "N members; ZRANK RATE …; …" of one run against the server on $1.
ranks() {
  local middle half member
  redis-cli -p "$1" del z >/dev/null
  redis-benchmark -q -p "$1" -n "$MEMBERS" -r 1000000000 -P 16 zadd z __rand_int__ __rand_int__ \
    >/dev/null 2>&1
  half=$(($(redis-cli -p "$1" zcard z) / 2))
  member=$(redis-cli -p "$1" zrange z "$half" "$half")
  middle=$((half + 9))
  echo "$(redis-cli -p "$1" zcard z) members;" \
    "ZRANK $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 zrank z "$member" | sed 's/.*: //');" \
    "ZREVRANK $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 zrevrank z "$member" | sed 's/.*: //');" \
    "ZCOUNT $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 zcount z -inf +inf | sed 's/.*: //');" \
    "ZRANGE $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 zrange z "$half" "$middle" | sed 's/.*: //');" \
    "ZRANGEBYSCORE-LIMIT $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 zrangebyscore z -inf +inf \
      limit "$half" 10 | sed 's/.*: //');" \
    "ZLEXCOUNT $(benchmark -p "$1" -n "$OPS" -c 1 -P 1 zlexcount z - + | sed 's/.*: //')"
}

echo "== ZADD z __rand_int__ __rand_int__ x $MEMBERS, then redis-benchmark -p PORT -n $OPS" \
  "-c 1 -P 1 -q of: ZRANK z MIDDLE, ZREVRANK z MIDDLE, ZCOUNT z -inf +inf, ZRANGE z HALF" \
  "HALF+9, ZRANGEBYSCORE z -inf +inf LIMIT HALF 10, ZLEXCOUNT z - +"
rounds_against_redis "$ROUNDS" ranks "$@"
