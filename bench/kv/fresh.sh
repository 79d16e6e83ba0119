#!/usr/bin/env bash
# The throughput bar's command exactly as issue 6 gives it (redis-benchmark's default of
# 100,000 requests) against fresh servers: each round starts Redis with no persistence,
# Redis with `appendfsync always` and `tailstore serve --commit buffer` in new directories,
# then runs the command once against each (the machine settled before each run). On a new
# database every SET of the first ~100,000 creates its key, and tailstore's files and memory
# grow (its PMEM log ring's first lap, the buffer pool's first frames): what a user who tries
# the command once sees, where bars.sh's later rounds measure servers already warm.
# usage: bench/kv/fresh.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE, REQUESTS)
BIN=${1:?usage: fresh.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
WORK=${WORK:-/var/tmp/tailstore-fresh}
BASE=${BASE:-7121}
. "$(dirname "$0")/servers.sh"
echo "== redis-benchmark -p PORT -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2 -n ${REQUESTS:-100000} -q, fresh servers each round"
for r in $(seq "$ROUNDS"); do
  start_servers "$BIN" >/dev/null
  for p in $NONE $ALWAYS $TAILSTORE; do
    settled=$(settle)
    echo "round $r port $p (settled in $settled): $(bar_command "$p")"
  done
  stop_servers
done
