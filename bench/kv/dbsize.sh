#!/usr/bin/env bash
# What DBSIZE and INFO keyspace cost on a large database, for one or more tailstore binaries
# (decision 73: counts kept by the writes instead of a scan of every key): a lone
# `serve --commit buffer` takes 4 x KEYS random SETs of 16-byte values over a key space of
# KEYS (redis-benchmark has no sequential keys: about 98% of the space gets written), then
# each command is timed five times from redis-cli's spawn to its reply (the time of a
# `redis-cli PING` is printed beside them, as the floor). While DBSIZE runs, the event loop
# serves no one else: this is how long every other client waits.
# usage: bench/kv/dbsize.sh KEYS TAILSTORE_BINARY...
# env: WORK, PORT.
KEYS=${1:?usage: dbsize.sh KEYS TAILSTORE_BINARY...}
shift
. "$(dirname "$0")/servers.sh"
need redis-cli; need redis-benchmark
lone_defaults dbsize 7113

for bin in "$@"; do
  stop_lone
  start_lone "$bin" serve
  redis-benchmark -p "$PORT" -t set -d 16 -r "$KEYS" -n $((4 * KEYS)) -c 50 -P 16 -q >/dev/null 2>&1
  echo "$(basename "$bin"): $(redis-cli -p "$PORT" dbsize) keys"
  for _ in 1 2 3 4 5; do
    echo "    PING $(timed ping); DBSIZE $(timed dbsize); INFO keyspace $(timed info keyspace)"
  done
done
