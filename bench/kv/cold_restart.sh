#!/usr/bin/env bash
# Restart of `tailstore serve --commit buffer` after SIGKILL with 1 GiB of 4 KiB values
# written (262,144 SETs), with the page cache emptied before the restart (sync, then
# drop_caches: needs root), as after a power cut with the log's tail in real PMEM: ms from
# spawn to the first reply to PING, and what recovery replayed. Interleaved rounds.
# usage: bench/kv/cold_restart.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, PORT)
set -euo pipefail
ROUNDS=${1:?usage: cold_restart.sh ROUNDS TAILSTORE_BINARY...}
shift
WORK=${WORK:-/var/tmp/tailstore-cold}
PORT=${PORT:-7121}
PMEM=/dev/shm/tailstore-cold-$PORT.pmem
[ -w /proc/sys/vm/drop_caches ] || { echo "error: dropping the page cache needs root" >&2; exit 1; }

cleanup() {
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  sleep 1
  rm -rf "$WORK" "$PMEM" "$PMEM.pages"
}
trap cleanup EXIT

serve() {
  "$1" serve --commit buffer --db "$WORK/db" --pmem "$PMEM" --listen "127.0.0.1:$PORT" \
    >"$WORK/$2.log" 2>&1 &
  SERVER=$!
}

one_run() {
  local bin=$1
  cleanup
  mkdir -p "$WORK"
  serve "$bin" first
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p "$PORT" -t set -d 4096 -r 262144 -n 262144 -c 50 -P 4 --threads 2 -q \
    >/dev/null 2>&1
  kill -9 "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  sync
  echo 3 >/proc/sys/vm/drop_caches
  local began ended
  began=$(date +%s%N)
  serve "$bin" restart
  until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.002; done
  ended=$(date +%s%N)
  echo "$(basename "$bin"): first reply after $(((ended - began) / 1000000)) ms;" \
    "$(grep -o 'opened in.*' "$WORK/restart.log")"
}

for round in $(seq "$ROUNDS"); do
  for bin in "$@"; do one_run "$bin"; done
done
