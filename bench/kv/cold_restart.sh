#!/usr/bin/env bash
# Restart of `tailstore serve --commit buffer` after SIGKILL with 1 GiB of 4 KiB values
# written (262,144 SETs), with the page cache emptied before the restart (sync, then
# drop_caches: needs root), as after a power cut with the log's tail in real PMEM: ms from
# spawn to the first reply to PING, and what recovery replayed. Interleaved rounds.
# usage: bench/kv/cold_restart.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, PORT)
ROUNDS=${1:?usage: cold_restart.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults cold 7121
[ -w /proc/sys/vm/drop_caches ] || { echo "error: dropping the page cache needs root" >&2; exit 1; }

one_run() {
  local bin=$1
  stop_lone
  start_lone "$bin" first
  redis-benchmark -p "$PORT" -t set -d 4096 -r 262144 -n 262144 -c 50 -P 4 --threads 2 -q \
    >/dev/null 2>&1
  kill -9 "$LONE"
  wait "$LONE" 2>/dev/null || true
  sync
  echo 3 >/proc/sys/vm/drop_caches
  local began ended
  began=$(date +%s%N)
  start_lone "$bin" restart
  ended=$(date +%s%N)
  echo "$(basename "$bin"): first reply after $(((ended - began) / 1000000)) ms;" \
    "$(grep -o 'opened in.*' "$WORK/restart.log")"
}

for round in $(seq "$ROUNDS"); do
  for bin in "$@"; do one_run "$bin"; done
done
