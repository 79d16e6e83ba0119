#!/usr/bin/env bash
# Streams against the three servers (Redis without persistence, Redis `appendfsync always`,
# `tailstore serve --commit buffer`), rounds interleaved: XADD of a 100-byte event to a
# stream capped with MAXLEN ~ 10000 (the shape of an event log such as BullMQ's), at the
# throughput settings of issue 6 (-c 50 -P 4 --threads 2) and at one client (-c 1 -P 1),
# then XREVRANGE of the last 10 entries (a reader of the log).
# usage: bench/kv/streams.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE, N)
BIN=${1:?usage: streams.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
WORK=${WORK:-/var/tmp/tailstore-streams}
BASE=${BASE:-7141}
N=${N:-300000}
. "$(dirname "$0")/servers.sh"
start_servers "$BIN"
VALUE=$(printf 'v%.0s' $(seq 100))
interleaved -c 50 -P 4 --threads 2 -n "$N" xadd events MAXLEN '~' 10000 '*' event "$VALUE"
interleaved -c 1 -P 1 -n 20000 xadd events MAXLEN '~' 10000 '*' event "$VALUE"
interleaved -c 50 -P 4 --threads 2 -n "$N" xrevrange events + - COUNT 10
