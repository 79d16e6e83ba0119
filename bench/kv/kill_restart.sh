#!/usr/bin/env bash
# The restart bar's crash, restarted in place: for each BINARY in turn (ROUNDS rounds,
# interleaved), a fresh `tailstore serve --commit buffer` takes 262,144 new keys of 4 KiB
# (1 GiB, the load of `tailstore kv compare --restart-data-mb 1024`), is killed with SIGKILL,
# and is started again on the same files at once, as a real crash leaves them (the log file
# out of the page cache, the PMEM ring in /dev/shm). Prints the time from the restart's spawn
# to its first PONG, the server's CPU by then (10 ms ticks) and its "opened in" line.
#   bench/kv/kill_restart.sh ROUNDS BINARY...   (env: WORK, PORT, SERVE_ARGS)
ROUNDS=${1:?usage: kill_restart.sh ROUNDS BINARY...}
shift
WORK=${WORK:-/var/tmp/tailstore-kill-restart}
PORT=${PORT:-7114}
PMEM=/dev/shm/tailstore-kill-restart-$PORT.pmem
# shellcheck disable=SC2086
serve() { exec "$1" serve --commit buffer --db "$WORK" --pmem "$PMEM" --listen "127.0.0.1:$PORT" $SERVE_ARGS; }
wait_pong() { for _ in $(seq 5000); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return 0; sleep 0.002; done; return 1; }
clean() { rm -rf "$WORK" "$PMEM" "$PMEM.pages"; }
trap 'pkill -f "listen 127.0.0.1:$PORT" 2>/dev/null; clean' EXIT
for r in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    clean
    serve "$bin" > "$WORK.load.log" 2>&1 &
    pid=$!
    wait_pong || { echo "$bin: the server did not start" >&2; exit 1; }
    "$bin" bench kv --server "127.0.0.1:$PORT" --clients 50 --threads 1 --pipeline 4 --ratio 1:0 \
      --data-size 4096 --key-space 262144 --key-pattern sequential --requests $((262144 / 50 + 1)) >/dev/null 2>&1
    kill -9 "$pid"; wait "$pid" 2>/dev/null
    began=$(date +%s%N)
    serve "$bin" > "$WORK.restart.log" 2>&1 &
    pid=$!
    wait_pong || { echo "$bin: the restart did not answer" >&2; exit 1; }
    ended=$(date +%s%N)
    read -ra stat < "/proc/$pid/stat"
    opened=$(grep -o 'opened in [0-9.]* ms (recovery replayed [0-9]* log bytes' "$WORK.restart.log")
    echo "round $r $(basename "$bin"): first PONG after $(( (ended - began) / 1000000 )) ms, $((stat[13] + stat[14])) ticks; $opened"
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1; wait "$pid" 2>/dev/null
  done
done
rm -f "$WORK.load.log" "$WORK.restart.log"
