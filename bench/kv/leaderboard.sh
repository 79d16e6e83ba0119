#!/usr/bin/env bash
# A leaderboard: ZINCRBY writers beside ZREVRANK readers on one large sorted set, Redis's
# canonical use of one. For Redis without persistence and each tailstore binary (a fresh
# `serve --commit buffer` per run), in interleaved rounds: a sorted set filled with about
# MEMBERS random members (redis-benchmark ZADD lb __rand_int__ member:__rand_int__), then
# ZREVRANK of random members alone (5 clients, 3 s), then for DURATION seconds ZINCRBY lb 1
# of random members (25 clients) and ZREVRANK (5 clients) at once. Prints each load's
# requests per second and, for tailstore, the transactions that aborted meanwhile
# (`tailstore_aborts`, INFO stats).
# usage: bench/kv/leaderboard.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT (tailstore; Redis gets PORT+1), MEMBERS (default 1000000), DURATION
# (seconds, default 8)
ROUNDS=${1:?usage: leaderboard.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults leaderboard 7141
need redis-server; need redis-cli; need redis-benchmark
MEMBERS=${MEMBERS:-1000000}
DURATION=${DURATION:-8}
REDIS=$((PORT + 1))

trap 'stop_lone; stop_plain_redis' EXIT

# `load SECONDS PORT OUT CLIENTS COMMAND…`: a redis-benchmark load of random members.
load() {
  local seconds=$1 port=$2 out=$3 clients=$4
  shift 4
  timeout "$seconds" redis-benchmark -p "$port" -c "$clients" -r "$MEMBERS" -n 100000000 "$@" \
    >"$out" 2>&1 || true
}

aborts() {
  redis-cli -p "$1" info stats | tr -d '\r' | awk -F: '/^tailstore_aborts:/ {print $2}'
}

# "N members; …" of one run against the server on $1.
leaderboard() {
  local port=$1 writer before after
  redis-benchmark -q -p "$port" -n "$MEMBERS" -r "$MEMBERS" -P 16 \
    zadd lb __rand_int__ member:__rand_int__ >/dev/null 2>&1
  load 3 "$port" "$WORK/alone" 5 zrevrank lb member:__rand_int__
  before=$(aborts "$port")
  load "$DURATION" "$port" "$WORK/writes" 25 zincrby lb 1 member:__rand_int__ &
  writer=$!
  load "$DURATION" "$port" "$WORK/reads" 5 zrevrank lb member:__rand_int__
  wait "$writer"
  after=$(aborts "$port")
  echo "$(redis-cli -p "$port" zcard lb) members; ZREVRANK alone $(rate_of "$WORK/alone")/s;" \
    "ZINCRBY $(rate_of "$WORK/writes")/s beside ZREVRANK $(rate_of "$WORK/reads")/s" \
    "${before:+(aborts $((after - before)))}"
}

echo "== ZADD lb __rand_int__ member:__rand_int__ x $MEMBERS; ZREVRANK lb member:__rand_int__" \
  "(5 clients, 3 s); then ${DURATION} s of ZINCRBY lb 1 member:__rand_int__ (25 clients)" \
  "beside ZREVRANK (5 clients)"
rounds_against_redis "$ROUNDS" leaderboard "$@"
