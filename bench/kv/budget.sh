#!/usr/bin/env bash
# The CPU one 4 KiB SET costs the server and the client, for Redis without persistence and
# `tailstore serve --commit buffer` side by side: on a machine whose cores the server and
# redis-benchmark share, the ratio of their throughputs follows the ratio of these sums.
# Each round runs the bar's load (redis-benchmark -t set -d 4096 -r 100000 -c 50 -P 4
# --threads 2, N SETs) against each server in turn, after one unmeasured run that writes the
# keys; the server's CPU (user + system, all threads) comes from /proc/PID/stat, the client's
# from /usr/bin/time.
# usage: bench/kv/budget.sh ROUNDS TAILSTORE_BINARY   (env: WORK, BASE, N (default 600,000))
ROUNDS=${1:?usage: budget.sh ROUNDS TAILSTORE_BINARY}
BIN=${2:?usage: budget.sh ROUNDS TAILSTORE_BINARY}
WORK=${WORK:-/var/tmp/tailstore-budget}
BASE=${BASE:-7131}
N=${N:-600000}
. "$(dirname "$0")/servers.sh"
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time is not installed (apt-get install time)" >&2; exit 1; }
start_servers "$BIN"
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# The pid of the server listening on port $1.
server_pid() {
  local pid
  pid=$(redis-cli -p "$1" info server | tr -d '\r' | awk -F: '/^process_id:/ {print $2}')
  [ -n "$pid" ] || { echo "error: no process_id from the server on port $1" >&2; exit 1; }
  echo "$pid"
}

# The bar's load on port $1, its "requests per second" line; with a second argument FILE,
# redis-benchmark's user and system seconds are written to FILE.
load() {
  local timed=()
  [ -z "${2:-}" ] || timed=(/usr/bin/time -f '%U %S' -o "$2")
  "${timed[@]}" redis-benchmark -p "$1" -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2 \
    -n "$N" -q 2>&1 | tr '\r' '\n' | grep 'requests per'
}

for port in $NONE $TAILSTORE; do load "$port" >/dev/null; done
echo "== $N SETs per run; CPU per SET of the server (all threads) and of redis-benchmark"
for round in $(seq "$ROUNDS"); do
  for port in $NONE $TAILSTORE; do
    pid=$(server_pid "$port")
    before=$(cpu_ticks "/proc/$pid")
    result=$(load "$port" "$WORK/client-time")
    after=$(cpu_ticks "/proc/$pid")
    awk -v name="$([ "$port" = "$NONE" ] && echo 'Redis none' || echo 'tailstore buffer')" \
      -v r="$round" -v result="$result" -v ticks=$((after - before)) -v tick="$TICK_US" -v n="$N" \
      '{ printf "round %s %-16s %s\n    server %.2f µs/SET, redis-benchmark %.2f µs/SET\n",
               r, name, result, ticks * tick / n, 1e6 * ($1 + $2) / n }' "$WORK/client-time"
  done
done
