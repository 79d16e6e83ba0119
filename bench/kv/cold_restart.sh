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
  stop_lone
  crash_after_gib "$1"
  sync
  echo 3 >/proc/sys/vm/drop_caches
  timed_restart "$1"
}

for round in $(seq "$ROUNDS"); do
  for bin in "$@"; do one_run "$bin"; done
done
