#!/usr/bin/env bash
# What checkpoints cost a pipelined 4 KiB SET load on `tailstore serve --commit buffer`, for
# one or more configurations (a binary and serve options) in interleaved rounds: a fresh
# server each run, 300,000 SETs to fill, then 600,000 measured (redis-benchmark -t set -d
# 4096 -r 100000 -c 50 -P 4 --threads 2). Prints SET/s, pages written per SET and log bytes
# per SET (INFO), the checkpoints run, the time writers waited at the bound on replay
# (`tailstore_checkpoint_room_wait_ms`), and the disk's write rate (/proc/diskstats of the
# device holding WORK, so anything else writing to it counts too).
# usage: bench/kv/checkpoints.sh ROUNDS "BINARY [SERVE OPTIONS]"...   (env: WORK, PORT, COMMIT)
# e.g. bench/kv/checkpoints.sh 3 ./old "./new --checkpoint-keep 0 --checkpoint-log 256MiB"
ROUNDS=${1:?usage: checkpoints.sh ROUNDS \"BINARY [SERVE OPTIONS]\"...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults checkpoints 7113
SET=(-p "$PORT" -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2)
N=600000

# A field of INFO, 0 if the binary has no such field: `info_field SECTION NAME`.
info_field() {
  redis-cli -p "$PORT" info "$1" | tr -d '\r' |
    awk -F: -v k="$2" '$1 == k {v = $2} END {print (v == "" ? 0 : v)}'
}

# Sectors written to the device that holds WORK.
sectors_written() {
  local dev
  dev=$(basename "$(findmnt -no SOURCE -T "$WORK")")
  awk -v d="$dev" '$3 == d {print $10}' /proc/diskstats
}

# "pages log checkpoints wait-ms" from INFO, then the sectors written, the time in ns and
# the checkpoints' time in ms.
snapshot() {
  echo "$(info_field all tailstore_pages_written) $(info_field persistence tailstore_log_bytes)" \
    "$(info_field persistence tailstore_checkpoints)" \
    "$(info_field persistence tailstore_checkpoint_room_wait_ms)" \
    "$(sectors_written) $(date +%s%N) $(info_field persistence tailstore_checkpoint_ms)"
}

one_run() {
  local config=$1 result
  stop_lone
  # shellcheck disable=SC2086 # the configuration is a binary and its options
  set -- $config
  start_lone "$1" serve "${@:2}"
  redis-benchmark "${SET[@]}" -n 300000 -q >/dev/null 2>&1
  local before after
  before=$(snapshot)
  result=$(redis-benchmark "${SET[@]}" -n "$N" -q 2>&1 | tr '\r' '\n' | grep 'requests per')
  after=$(snapshot)
  echo "$config: $result"
  echo "$before $after" | awk -v n="$N" '{
    c = $10 - $3; each = 0
    if (c > 0) each = ($14 - $7) / c
    printf "    pages written/SET %.3f, log B/SET %d, checkpoints %d (%.0f ms each), waited %.0f ms, disk %.0f MB/s\n",
      ($8 - $1) / n, ($9 - $2) / n, c, each, $11 - $4,
      ($12 - $5) * 512 / (($13 - $6) / 1e9) / 1e6 }'
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  for config in "$@"; do one_run "$config"; done
done
