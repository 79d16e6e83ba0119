#!/usr/bin/env bash
# TPC-C with two or more tailstore binaries side by side: each loads its own database (builds
# of different page sizes cannot open each other's files), then runs take turns, ROUNDS
# rounds, every run on its binary's database (the runs only add orders). Prints NOPM and
# CPU use per run; compare medians per binary.
# usage: bench/tpcc/builds.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, COMMIT (default
#        buffer), WAREHOUSES (1), USERS (4), DURATION (20 s))
set -euo pipefail
ROUNDS=${1:?usage: builds.sh ROUNDS TAILSTORE_BINARY...}
shift
[ $# -ge 1 ] || { echo "usage: builds.sh ROUNDS TAILSTORE_BINARY..." >&2; exit 2; }
WORK=${WORK:-/var/tmp/tailstore-tpcc-builds}
COMMIT=${COMMIT:-buffer}
WAREHOUSES=${WAREHOUSES:-1}
USERS=${USERS:-4}
DURATION=${DURATION:-20}
PMEM=/dev/shm/tailstore-tpcc-builds

clean() { rm -rf "$WORK" "$PMEM".*; }
trap clean EXIT
clean
mkdir -p "$WORK"

# The options every command of binary number $1 takes: its database and, in the PMEM
# modes, its PMEM file.
db_args() {
  local args=(--db "$WORK/db$1" --commit "$COMMIT")
  [ "$COMMIT" = fsync ] || [ "$COMMIT" = async ] || args+=(--pmem "$PMEM.$1.pmem")
  echo "${args[@]}"
}

i=0
for bin in "$@"; do
  i=$((i + 1))
  echo "== load $bin: tpcc load --warehouses $WAREHOUSES --commit $COMMIT ($(date -u +%H:%M) UTC)"
  # shellcheck disable=SC2046 # db_args is a list of options
  "$bin" tpcc load $(db_args "$i") --warehouses "$WAREHOUSES" 2>&1 | tail -1
done

echo "== tpcc run --users $USERS --rampup 3 --duration $DURATION --commit $COMMIT ($(date -u +%H:%M) UTC)"
for round in $(seq "$ROUNDS"); do
  i=0
  for bin in "$@"; do
    i=$((i + 1))
    # shellcheck disable=SC2046
    out=$("$bin" tpcc run $(db_args "$i") --users "$USERS" --rampup 3 \
      --duration "$DURATION" --progress 0 2>&1)
    nopm=$(echo "$out" | grep -oE '[0-9,]+ NOPM' | tail -1)
    cpu=$(echo "$out" | grep -E '^cpu' | grep -oE '[0-9]+% of [0-9]+ cores')
    echo "round $round $(basename "$bin"): ${nopm:-(no result)}, cpu ${cpu:-?}"
  done
done
