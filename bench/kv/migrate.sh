#!/usr/bin/env bash
# `tailstore kv migrate` from Redis (decision 138): a redis-server without persistence filled
# by redis-benchmark (SET of 100-byte values over 200,000 random keys, ~126,000 keys; with
# COLLECTIONS=1 also LPUSH, SADD, HSET and ZADD, four keys of ~200,000 elements each, past
# tailstore's commit limit), then copied into a fresh `tailstore serve --commit buffer` once
# per batch size, the target flushed between runs. Prints what migrate says (keys copied,
# not copied and why, keys/s) and both servers' DBSIZE.
# usage: bench/kv/migrate.sh TAILSTORE_BINARY [BATCH...]   (env: PORT, the Redis port; the
# target listens on PORT+1)
set -u
BIN=${1:?usage: migrate.sh TAILSTORE_BINARY [BATCH...]}
shift
BATCHES=${*:-100 500}
PORT=${PORT:-7399}
TARGET=$((PORT + 1))
d=$(mktemp -d /var/tmp/tailstore-migrate.XXXX)
pmem=/dev/shm/$(basename "$d").pmem
cleanup() {
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    rm -rf "$d" "$pmem" "$pmem.pages"
}
trap cleanup EXIT
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" \
    --daemonize yes --logfile "$d/redis.log" >/dev/null
"$BIN" serve --db "$d/db" --commit buffer --pmem "$pmem" --listen "127.0.0.1:$TARGET" \
    > "$d/serve.log" 2>&1 &
pid=$!
for port in "$PORT" "$TARGET"; do
    for _ in $(seq 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
tests=set
[ "${COLLECTIONS:-0}" = 1 ] && tests=set,lpush,sadd,hset,zadd
redis-benchmark -p "$PORT" -t "$tests" -n 200000 -r 200000 -d 100 -q >/dev/null 2>&1
echo "source: redis-server :$PORT, $(redis-cli -p "$PORT" dbsize) keys; target: $BIN :$TARGET; $(date -u +%H:%M) UTC"
for batch in $BATCHES; do
    redis-cli -p "$TARGET" flushall >/dev/null
    echo "== tailstore kv migrate --from 127.0.0.1:$PORT --to 127.0.0.1:$TARGET --batch $batch"
    "$BIN" kv migrate --from "127.0.0.1:$PORT" --to "127.0.0.1:$TARGET" --batch "$batch"
    echo "exit code $?; target DBSIZE $(redis-cli -p "$TARGET" dbsize)"
done
