#!/usr/bin/env bash
# What a SET's value costs tailstore: bars.sh's throughput load (-c 50 -P 4 --threads 2, 100,000
# random keys) with values of several sizes, each size in its own database (--dbnum) of one
# `serve --commit buffer`, so that no run changes the size of the values it overwrites; every
# size is written once, unmeasured, first. Per run: SET/s and the server's CPU per SET by
# thread (event loop, checkpointer, log writer). Redis without persistence and Redis
# `appendfsync always` run the bar's 4 KiB load in the same rounds, for the ratios.
# A 4 KiB value is three part rows of the B+tree (at most 1,915 bytes each), 1,900 bytes one.
# usage: bench/kv/value_sizes.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE, SIZES, SETS)
BIN=${1:?usage: value_sizes.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
SIZES=${SIZES:-16 1900 4096}
SETS=${SETS:-1000000}
WORK=${WORK:-/var/tmp/tailstore-value-sizes}
BASE=${BASE:-7131}
TICK_US=$((1000000 / $(getconf CLK_TCK)))
. "$(dirname "$0")/servers.sh"
start_servers "$BIN"
SERVER=$(pgrep -f -- "--listen 127.0.0.1:$TAILSTORE" | head -1)
load() {
  local port=$1 size=$2 db=$3 sets=$4
  benchmark -p "$port" --dbnum "$db" -t set -d "$size" -r 100000 -c 50 -P 4 --threads 2 -n "$sets"
}
db=0
for size in $SIZES; do db=$((db + 1)); load "$TAILSTORE" "$size" "$db" 300000 >/dev/null; done
echo "== redis-benchmark -p PORT --dbnum DB -t set -d SIZE -r 100000 -c 50 -P 4 --threads 2 -n $SETS -q"
for r in $(seq "$ROUNDS"); do
  for p in $NONE $ALWAYS; do echo "round $r port $p 4096 bytes: $(load "$p" 4096 0 "$SETS")"; done
  db=0
  for size in $SIZES; do
    db=$((db + 1))
    by_thread "$SERVER" cpu_ticks >"$WORK/before"
    echo "round $r port $TAILSTORE $size bytes: $(load "$TAILSTORE" "$size" "$db" "$SETS")"
    by_thread "$SERVER" cpu_ticks >"$WORK/after"
    per_op "$WORK/before" "$WORK/after" "$SETS" "$TICK_US" µs/SET
  done
done
