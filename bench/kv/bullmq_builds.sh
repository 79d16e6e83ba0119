#!/usr/bin/env bash
# BullMQ (bench/kv/bullmq/jobs.js, as bullmq.sh runs it) against a fresh `tailstore serve
# --commit buffer` of each BINARY in turn, ROUNDS rounds interleaved, the machine settled
# before each run: jobs per second, build against build.
# usage: bench/kv/bullmq_builds.sh ROUNDS BINARY...   (env: WORK, PORT, JOBS, CONCURRENCY)
ROUNDS=${1:?usage: bullmq_builds.sh ROUNDS BINARY...}
shift
. "$(dirname "$0")/servers.sh"
lone_defaults bullmq-builds 7161
for r in $(seq "$ROUNDS"); do for bin in "$@"; do
  start_lone "$bin" serve
  settled=$(settle)
  echo "round $r $(basename "$bin") (settled in $settled): $(bullmq_jobs "$PORT")"
  stop_lone
done; done
