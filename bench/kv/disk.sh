#!/usr/bin/env bash
# Disk bytes per 4 KiB SET of `tailstore serve --commit buffer`, by thread (the log writer,
# the checkpointer), and SET/s, for one or more tailstore binaries in interleaved rounds:
# a fresh server each run, 200,000 SETs to fill, then 400,000 measured
# (redis-benchmark -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2).
# usage: bench/kv/disk.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, PORT)
ROUNDS=${1:?usage: disk.sh ROUNDS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults disk 7111
N=400000
SET=(-p "$PORT" -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2)

# Bytes a thread has written, from its /proc directory $1.
bytes_written() { awk '/^write_bytes/ {print $2}' "$1/io"; }

one_run() {
  local bin=$1
  stop_lone
  start_lone "$bin" serve
  redis-benchmark "${SET[@]}" -n 200000 -q >/dev/null 2>&1
  by_thread "$LONE" bytes_written >"$WORK/before"
  local result
  result=$(redis-benchmark "${SET[@]}" -n "$N" -q 2>&1 | tr '\r' '\n' | grep 'requests per')
  by_thread "$LONE" bytes_written >"$WORK/after"
  echo "$(basename "$bin"): $result"
  per_op "$WORK/before" "$WORK/after" "$N" 1 B/SET
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  for bin in "$@"; do one_run "$bin"; done
done
