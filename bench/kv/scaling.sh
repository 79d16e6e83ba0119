#!/usr/bin/env bash
# The bar's throughput load at several client-thread counts, for machines with more cores
# than the 2 the bars are set on: 4 KiB SETs and then 4 KiB GETs over 100,000 keys, pipeline
# 4, 25 connections per redis-benchmark thread, against Redis without persistence, Redis with
# `appendfsync always` and `tailstore serve --commit buffer` (its default event loops: one
# per core), rounds interleaved. Prints the machine (cores, model) and each server's CPU
# seconds over the whole script, since a single-threaded Redis and a multi-loop tailstore
# spend different amounts of the machine for their figures.
# usage: bench/kv/scaling.sh TAILSTORE_BINARY [ROUNDS] [THREADS...]   (env: WORK, BASE, REQUESTS)
BIN=${1:?usage: scaling.sh TAILSTORE_BINARY [ROUNDS] [THREADS...]}
ROUNDS=${2:-2}
shift $(($# < 2 ? $# : 2))
THREAD_COUNTS=${*:-2 4 8}
REQUESTS=${REQUESTS:-1000000}
WORK=${WORK:-/var/tmp/tailstore-scaling}
BASE=${BASE:-7101}
. "$(dirname "$0")/servers.sh"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
start_servers "$BIN"
for test in set get; do
  for threads in $THREAD_COUNTS; do
    interleaved -t "$test" -d 4096 -r 100000 -c $((25 * threads)) -P 4 --threads "$threads" -n "$REQUESTS"
  done
done
# utime + stime of each server process, in seconds (clock ticks of 1/100 s).
cpu_seconds() {
  awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$1/stat"
}
for p in $NONE $ALWAYS $TAILSTORE; do
  pid=$(redis-cli -p "$p" info server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')
  [ -z "$pid" ] || echo "port $p: server CPU $(cpu_seconds "$pid") s over the script"
done
