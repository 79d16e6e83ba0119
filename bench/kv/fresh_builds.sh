#!/usr/bin/env bash
# The bar's command as issue 6 gives it (redis-benchmark's default of 100,000 requests)
# against a fresh `tailstore serve --commit buffer` of each BINARY in turn, ROUNDS rounds
# interleaved, the machine settled before each run: what a new database's first SETs cost
# (keys created, the PMEM log ring's first lap, the buffer pool's first frames), build
# against build. fresh.sh runs the same command beside Redis.
# usage: bench/kv/fresh_builds.sh ROUNDS BINARY...   (env: WORK, PORT, REQUESTS, SERVE_ARGS)
# shellcheck disable=SC2086
ROUNDS=${1:?usage: fresh_builds.sh ROUNDS BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults fresh-builds 7131
for r in $(seq "$ROUNDS"); do for bin in "$@"; do
  start_lone "$bin" serve ${SERVE_ARGS:-}
  settled=$(settle)
  echo "round $r $(basename "$bin") (settled in $settled): $(bar_command "$PORT")"
  stop_lone
done; done
