#!/usr/bin/env bash
# One crashed state, restarted by each binary from a fresh copy of it: a fresh
# `tailstore serve --commit buffer` (built by the first binary) takes 1 GiB of 4 KiB values
# (262,144 random SETs) and is killed with SIGKILL; its directory, PMEM file and double-write
# file are saved; then, in interleaved rounds, each binary restarts from a copy (synced to
# disk first, so that no writeback of the copy slows the restart; with COLD=1 the page cache
# is then dropped, as after a power cut with real PMEM: needs root). Prints ms from spawn to
# the first reply to PING and what recovery replayed, the same log for every run.
# usage: bench/kv/restart_copies.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, PORT, COLD)
ROUNDS=${1:?usage: restart_copies.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults copies 7122
SAVED=$WORK.saved
trap 'stop_lone; rm -rf "$SAVED" "$PMEM.saved" "$PMEM.pages.saved"' EXIT
if [ "${COLD:-0}" = 1 ] && [ ! -w /proc/sys/vm/drop_caches ]; then
  echo "error: dropping the page cache needs root" >&2
  exit 1
fi

stop_lone
crash_after_gib "$1"
rm -rf "$SAVED" && cp -a "$WORK" "$SAVED"
cp "$PMEM" "$PMEM.saved" && cp "$PMEM.pages" "$PMEM.pages.saved"

one_run() {
  kill -9 "${LONE:-0}" 2>/dev/null || true
  wait "${LONE:-0}" 2>/dev/null || true
  rm -rf "$WORK" && cp -a "$SAVED" "$WORK"
  cp "$PMEM.saved" "$PMEM" && cp "$PMEM.pages.saved" "$PMEM.pages"
  sync
  [ "${COLD:-0}" = 1 ] && echo 3 >/proc/sys/vm/drop_caches
  timed_restart "$1"
}

for round in $(seq "$ROUNDS"); do
  for bin in "$@"; do one_run "$bin"; done
done
