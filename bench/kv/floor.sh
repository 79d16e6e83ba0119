#!/usr/bin/env bash
# The floor of a durable SET: bars.sh's throughput run with 16-byte values instead of 4 KiB,
# 1,000,000 SETs per run, all three servers in one session, rounds interleaved.
# usage: bench/kv/floor.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE, SETS per run)
BIN=${1:?usage: floor.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
WORK=${WORK:-/var/tmp/tailstore-floor}
BASE=${BASE:-7101}
. "$(dirname "$0")/servers.sh"
start_servers "$BIN"
interleaved -t set -d 16 -r 100000 -c 50 -P 4 --threads 2 -n "${SETS:-1000000}"
