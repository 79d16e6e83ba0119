#!/usr/bin/env bash
# PUBLISH throughput with subscribers listening: tailstore (a fresh `serve --commit buffer`
# per run; messages never touch the log) against Redis without persistence, in interleaved
# rounds. Each run starts SUBS subscribers (redis-cli SUBSCRIBE, output counted), then
# redis-benchmark sends N PUBLISHes of a 64-byte message with 50 connections, 4 in flight
# each; it prints requests per second and how many messages the subscribers received
# (N x SUBS when none was lost).
# usage: bench/kv/publish.sh ROUNDS TAILSTORE_BINARY...
# env: WORK, PORT (tailstore; Redis gets PORT+1), N (default 500000), SUBS (default 2)
ROUNDS=${1:?usage: publish.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults publish 7119
need redis-server; need redis-cli; need redis-benchmark
N=${N:-500000}
SUBS=${SUBS:-2}
REDIS=$((PORT + 1))
MESSAGE=$(printf 'm%.0s' $(seq 64))

trap 'stop_lone; stop_plain_redis' EXIT

# "RATE requests/s, RECEIVED messages received" of one run against the server on $1.
run() {
  local port=$1 received
  start_subscribers "$port" "$SUBS" subscribe channel
  for _ in $(seq 100); do
    [ "$(redis-cli -p "$port" pubsub numsub channel | tail -1)" = "$SUBS" ] && break
    sleep 0.05
  done
  local rate
  rate=$(redis-benchmark -p "$port" -n "$N" -c 50 -P 4 --threads 2 -q publish channel "$MESSAGE" 2>&1 |
    tr '\r' '\n' | awk '/requests per second/ {
      for (i = 1; i < NF; i++) if ($(i + 1) == "requests") { print $i; exit } }')
  # redis-cli prints a message as three lines: "message", the channel, the payload.
  received=$(stop_subscribers "$MESSAGE")
  echo "$rate requests/s, $received messages received"
}

echo "== redis-benchmark -p PORT -n $N -c 50 -P 4 --threads 2 -q publish channel <64 bytes>, $SUBS subscribers"
rounds_against_redis "$ROUNDS" run "$@"
