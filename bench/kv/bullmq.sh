#!/usr/bin/env bash
# BullMQ (a Node.js job queue whose every step is a Lua script, with an event stream read
# by XREAD BLOCK) against the three servers (Redis without persistence, Redis `appendfsync
# always`, `tailstore serve --commit buffer`), rounds interleaved: bench/kv/bullmq/jobs.js
# checks that delayed, prioritized, retried and parent/child jobs work, then reports jobs
# per second through one queue. Installs BullMQ (the version bullmq/package.json pins) with
# npm on first use; needs node and npm. bullmq_builds.sh compares tailstore binaries.
# usage: bench/kv/bullmq.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE, JOBS, CONCURRENCY)
BIN=${1:?usage: bullmq.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
WORK=${WORK:-/var/tmp/tailstore-bullmq}
BASE=${BASE:-7151}
JOBS=${JOBS:-5000}
CONCURRENCY=${CONCURRENCY:-50}
. "$(dirname "$0")/servers.sh"
start_servers "$BIN"
echo "== node bench/kv/bullmq/jobs.js PORT $JOBS $CONCURRENCY ($(node --version))"
for r in $(seq "$ROUNDS"); do for p in $NONE $ALWAYS $TAILSTORE; do
  settled=$(settle)
  echo "round $r port $p (settled in $settled): $(bullmq_jobs "$p")"
done; done
