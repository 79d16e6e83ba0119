#!/usr/bin/env bash
# What FLUSHALL costs on a large database (decision 163: a flushed database gets a fresh stored
# number and its keys are freed in the background), for one or more tailstore binaries and
# Redis without persistence: each server takes KEYS SETs of 100-byte values (key:0 ..
# key:KEYS-1, through `redis-cli --pipe`), then FLUSHALL is timed from redis-cli's spawn to its
# reply (a `redis-cli PING` beside it is the floor), DBSIZE is read at once, and the script
# waits, polling INFO every 100 ms, until `lazyfree_pending_objects` is 0: the background free.
# usage: bench/kv/flush.sh KEYS TAILSTORE_BINARY...
# env: WORK, PORT.
KEYS=${1:?usage: flush.sh KEYS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
need redis-server; need redis-cli
lone_defaults flush 7114

fill() {
  python3 "$(dirname "$0")/fill_keys.py" "$KEYS" | redis-cli -p "$PORT" --pipe >/dev/null
}

# Seconds until INFO's lazyfree_pending_objects reads 0.
freed_after() {
  local began pending
  began=$(date +%s%N)
  while :; do
    pending=$(redis-cli -p "$PORT" info memory | tr -d '\r' | awk -F: '/^lazyfree_pending_objects:/ {print $2}')
    [ "${pending:-0}" = 0 ] && break
    sleep 0.1
  done
  printf '%.1f s' "$(echo "($(date +%s%N) - $began) / 1000000000" | bc -l)"
}

measure() {
  fill
  echo "    $(redis-cli -p "$PORT" dbsize) keys; PING $(timed ping); FLUSHALL $(timed flushall);" \
    "then DBSIZE $(redis-cli -p "$PORT" dbsize); the background free done after $(freed_after)"
}

echo "== $KEYS keys; $(date -u +%H:%M) UTC"
stop_lone
mkdir -p "$WORK"
redis-server --port "$PORT" --save '' --appendonly no --dir "$WORK" --daemonize yes \
  --logfile "$WORK/redis.log" >/dev/null
answers -p "$PORT"
echo "redis-server $(redis-server --version | grep -o 'v=[0-9.]*'):"
measure
stop_lone
for bin in "$@"; do
  start_lone "$bin" serve
  echo "$(basename "$bin"):"
  measure
  stop_lone
done
