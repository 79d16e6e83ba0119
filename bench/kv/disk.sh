#!/usr/bin/env bash
# Disk bytes per 4 KiB SET of `tailstore serve --commit buffer`, by thread (the log writer,
# the checkpointer), and SET/s, for one or more tailstore binaries in interleaved rounds:
# a fresh server each run, 200,000 SETs to fill, then 400,000 measured
# (redis-benchmark -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2).
# usage: bench/kv/disk.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, PORT)
ROUNDS=${1:?usage: disk.sh ROUNDS TAILSTORE_BINARY...}
shift
WORK=${WORK:-/var/tmp/tailstore-disk}
PORT=${PORT:-7111}
PMEM=/dev/shm/tailstore-disk-$PORT.pmem
. "$(dirname "$0")/servers.sh"
trap stop_lone EXIT
N=400000
SET=(-p "$PORT" -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2)

# "thread-name bytes-written" for every thread of process $1.
written_by_thread() {
  for task in /proc/"$1"/task/*; do
    echo "$(tr ' ' '_' <"$task/comm") $(awk '/^write_bytes/ {print $2}' "$task/io")"
  done | sort
}

one_run() {
  local bin=$1
  stop_lone
  start_lone "$bin" serve
  redis-benchmark "${SET[@]}" -n 200000 -q >/dev/null 2>&1
  written_by_thread "$LONE" >"$WORK/before"
  local result
  result=$(redis-benchmark "${SET[@]}" -n "$N" -q 2>&1 | tr '\r' '\n' | grep 'requests per')
  written_by_thread "$LONE" >"$WORK/after"
  echo "$(basename "$bin"): $result"
  join "$WORK/before" "$WORK/after" | awk -v n="$N" '
    { d = ($3 - $2) / n; if (d > 0) printf "    %-18s %6.0f B/SET\n", $1, d; total += d }
    END { printf "    %-18s %6.0f B/SET\n", "all threads", total }'
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  for bin in "$@"; do one_run "$bin"; done
done
