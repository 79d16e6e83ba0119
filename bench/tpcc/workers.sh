#!/usr/bin/env bash
# TPC-C with many users on one warehouse, with and without the bound on transactions running
# at once (`--workers`, decision 92): for each user count, interleaved rounds of each
# `--workers` setting, every run on the same database (the runs only add orders). Prints NOPM,
# CPU use and retries per run; compare medians per row.
# usage: bench/tpcc/workers.sh ROUNDS TAILSTORE_BINARY   (env: WORK, COMMIT (default fsync),
#        WAREHOUSES (1), USERS ("16 64 256"), WORKERS ("none 4"; "none" omits the flag: no bound),
#        DURATION (10 s))
set -euo pipefail
ROUNDS=${1:?usage: workers.sh ROUNDS TAILSTORE_BINARY}
BIN=${2:?usage: workers.sh ROUNDS TAILSTORE_BINARY}
WORK=${WORK:-/var/tmp/tailstore-tpcc-workers}
COMMIT=${COMMIT:-fsync}
WAREHOUSES=${WAREHOUSES:-1}
USERS=${USERS:-16 64 256}
WORKERS=${WORKERS:-none 4}
DURATION=${DURATION:-10}
PMEM=/dev/shm/tailstore-tpcc-workers.pmem

clean() { rm -rf "$WORK" "$PMEM" "$PMEM.pages"; }
trap clean EXIT
clean
mkdir -p "$WORK"
pmem_args=()
[ "$COMMIT" = fsync ] || [ "$COMMIT" = async ] || pmem_args=(--pmem "$PMEM")
echo "== load: tpcc load --warehouses $WAREHOUSES --commit $COMMIT ($(date -u +%H:%M) UTC)"
"$BIN" tpcc load --db "$WORK/db" --commit "$COMMIT" "${pmem_args[@]}" \
  --warehouses "$WAREHOUSES" 2>&1 | tail -1

for round in $(seq "$ROUNDS"); do
  for users in $USERS; do
    for workers in $WORKERS; do
      flag=()
      [ "$workers" = none ] || flag=(--workers "$workers")
      out=$("$BIN" tpcc run --db "$WORK/db" --commit "$COMMIT" "${pmem_args[@]}" \
        --users "$users" "${flag[@]}" --rampup 3 --duration "$DURATION" --progress 0 2>&1)
      nopm=$(echo "$out" | grep -oE '[0-9,]+ NOPM' | tail -1)
      cpu=$(echo "$out" | grep -E '^cpu' | grep -oE '[0-9]+% of [0-9]+ cores')
      bound=$(echo "$out" | grep -oE '(no worker bound|[0-9]+ workers?)$' | tail -1)
      retries=$(echo "$out" | grep -E '^retries' | grep -oE 'read-changed [0-9,]*[0-9]')
      echo "round $round, $users users, $bound: $nopm, cpu $cpu, $retries"
    done
  done
done
