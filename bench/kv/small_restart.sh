#!/usr/bin/env bash
# Restart time after SIGKILL under a load of small values (decision 75): `serve --commit
# buffer` (or COMMIT) takes `redis-benchmark -t set -d DATA_SIZE -r KEYS -c 50 -P 16
# --threads 2` until the log since its last checkpoint reaches KILLAT MiB (default 250; the
# replay weight where the server reports one, else bytes; at most 60 s), is killed, and is
# started again on its files. Prints the ms to the first reply and what recovery replayed.
#   bench/kv/small_restart.sh BINARY DATA_SIZE KEYS [SERVE OPTIONS…]
. "$(dirname "$0")/servers.sh"
need redis-cli; need redis-benchmark
lone_defaults small-restart 7124
BIN=$1; SIZE=$2; KEYS=$3; shift 3
start_lone "$BIN" first "$@"
redis-benchmark -p "$PORT" -t set -d "$SIZE" -r "$KEYS" -n 100000000 -c 50 -P 16 --threads 2 -q \
  >/dev/null 2>&1 &
LOAD=$!
since=0
for _ in $(seq 300); do
  sleep 0.2
  info=$(redis-cli -p "$PORT" info persistence | tr -d '\r')
  since=$(echo "$info" | grep -E '^tailstore_replay_weight_since_checkpoint:' | cut -d: -f2 || true)
  [ -n "$since" ] || since=$(echo "$info" | grep -E '^tailstore_log_since_checkpoint_bytes:' | cut -d: -f2 || true)
  [ -n "$since" ] && [ "$since" -gt $((${KILLAT:-250} << 20)) ] && break
done
echo "killed with $((since >> 20)) MiB since the checkpoint; $(redis-cli -p "$PORT" dbsize) keys"
kill -9 "$LONE"; wait "$LONE" 2>/dev/null || true
kill "$LOAD" 2>/dev/null || true; wait "$LOAD" 2>/dev/null || true
began=$(date +%s%N)
start_lone "$BIN" restart "$@"
ended=$(date +%s%N)
echo "$(basename "$BIN") -d $SIZE -r $KEYS $*: first reply after $(((ended - began) / 1000000)) ms; $(grep -o 'opened in.*' "$WORK/restart.log")"
