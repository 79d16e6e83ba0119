#!/usr/bin/env bash
# TPC-C in `buffer` mode with a buffer pool an eighth of the data (dirty pages evicted all the
# time: the double-write area's worst case), for one or more tailstore binaries in interleaved
# rounds, every run from a copy of one 4-warehouse load (made by the first binary).
# usage: bench/tpcc/small_pool.sh ROUNDS TAILSTORE_BINARY...   (env: WORK, POOL, USERS)
set -euo pipefail
ROUNDS=${1:?usage: small_pool.sh ROUNDS TAILSTORE_BINARY...}
shift
[ $# -gt 0 ] || { echo "usage: small_pool.sh ROUNDS TAILSTORE_BINARY..." >&2; exit 1; }
WORK=${WORK:-/var/tmp/tailstore-tpcc-small}
POOL=${POOL:-64MiB}
USERS=${USERS:-4}
LOADED=$WORK/loaded
LOADED_PMEM=/dev/shm/tailstore-tpcc-small-loaded.pmem
RUN=$WORK/run
RUN_PMEM=/dev/shm/tailstore-tpcc-small-run.pmem

clean() { rm -rf "$WORK" "$LOADED_PMEM" "$LOADED_PMEM.pages" "$RUN_PMEM" "$RUN_PMEM.pages"; }
trap clean EXIT
clean
mkdir -p "$WORK"
echo "== load: $1 tpcc load --warehouses 4 --commit buffer ($(date -u +%H:%M) UTC)"
"$1" tpcc load --db "$LOADED" --commit buffer --pmem "$LOADED_PMEM" --warehouses 4 2>&1 | tail -2

for round in $(seq "$ROUNDS"); do
  echo "== round $round: tpcc run --users $USERS --rampup 2 --duration 15 --buffer-pool $POOL"
  for bin in "$@"; do
    rm -rf "$RUN" "$RUN_PMEM" "$RUN_PMEM.pages"
    cp -r "$LOADED" "$RUN"
    cp "$LOADED_PMEM" "$RUN_PMEM"
    cp "$LOADED_PMEM.pages" "$RUN_PMEM.pages"
    result=$("$bin" tpcc run --db "$RUN" --commit buffer --pmem "$RUN_PMEM" --users "$USERS" \
      --rampup 2 --duration 15 --buffer-pool "$POOL" 2>&1 | grep 'NOPM' | tail -1)
    echo "$(basename "$bin"): $result"
  done
done
