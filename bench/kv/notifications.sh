#!/usr/bin/env bash
# What keyspace notifications cost: SET throughput of one `tailstore serve --commit buffer`
# with `notify-keyspace-events` off (the default), on (KEA) with nobody subscribed, and on
# with SUBS subscribers to every key event (redis-cli PSUBSCRIBE '__key*__:*', output
# counted), and of Redis without persistence the same three ways, in interleaved rounds
# (a fresh server each run). redis-benchmark sends N SETs of 64 bytes to 100,000 keys with
# 50 connections, 4 in flight each; each line gives requests per second and, with
# subscribers, the messages they received (two per SET per subscriber when none was lost).
# usage: bench/kv/notifications.sh ROUNDS TAILSTORE_BINARY
# env: WORK, PORT (tailstore; Redis gets PORT+1), N (default 300000), SUBS (default 1)
ROUNDS=${1:?usage: notifications.sh ROUNDS TAILSTORE_BINARY}
BIN=${2:?usage: notifications.sh ROUNDS TAILSTORE_BINARY}
. "$(dirname "$0")/servers.sh"
lone_defaults notifications 7123
need redis-server; need redis-cli; need redis-benchmark
N=${N:-300000}
SUBS=${SUBS:-1}
REDIS=$((PORT + 1))

trap 'stop_lone; stop_plain_redis' EXIT

# "RATE requests/s[, RECEIVED messages received]" of one run against the server on $1,
# with the setting $2 and $3 subscribers.
run() {
  local port=$1 setting=$2 subs=$3 rate received
  redis-cli -p "$port" config set notify-keyspace-events "$setting" >/dev/null
  start_subscribers "$port" "$subs" psubscribe '__key*__:*'
  for _ in $(seq 100); do
    [ "$(redis-cli -p "$port" pubsub numpat)" = "$subs" ] && break
    sleep 0.05
  done
  rate=$(redis-benchmark -p "$port" -n "$N" -r 100000 -d 64 -c 50 -P 4 --threads 2 -q -t set 2>&1 |
    tr '\r' '\n' | awk '/requests per second/ {
      for (i = 1; i < NF; i++) if ($(i + 1) == "requests") { print $i; exit } }')
  # redis-cli prints a pattern message as four lines: "pmessage", the pattern, the channel,
  # the payload.
  received=$(stop_subscribers pmessage)
  if [ "$subs" -eq 0 ]; then
    echo "$rate requests/s"
  else
    echo "$rate requests/s, $received messages received"
  fi
}

# The three runs of one round against a server on $1 that `$2 PORT` (re)starts fresh.
three_ways() {
  local port=$1 start=$2 name=$3
  for way in "off:'':0" "on, nobody listening:KEA:0" "on, $SUBS listening:KEA:$SUBS"; do
    IFS=: read -r label setting subs <<<"$way"
    setting=${setting//\'/}
    "$start"
    echo "$name, notifications $label: $(run "$port" "$setting" "$subs")"
  done
}

fresh_redis() {
  stop_plain_redis
  rm -rf "$WORK/redis" && mkdir -p "$WORK/redis"
  redis-server --port "$REDIS" --save '' --appendonly no --dir "$WORK/redis" \
    --daemonize yes --logfile "$WORK/redis/log" >/dev/null
  answers -p "$REDIS"
}

fresh_tailstore() {
  stop_lone
  start_lone "$BIN" serve
}

echo "== redis-benchmark -n $N -r 100000 -d 64 -c 50 -P 4 --threads 2 -t set"
for round in $(seq "$ROUNDS"); do
  echo "== round $round ($(date -u +%H:%M) UTC)"
  three_ways "$REDIS" fresh_redis "redis (no persistence)"
  stop_plain_redis
  three_ways "$PORT" fresh_tailstore "$(basename "$BIN")"
  stop_lone
done
