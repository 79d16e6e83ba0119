#!/usr/bin/env bash
# Where the whole machine's CPU goes per 4 KiB SET under the throughput bar's load, for
# tailstore (`serve --commit buffer`) and Redis without persistence, in interleaved rounds:
# the server process, redis-benchmark, the kernel's own threads (kworker writeback, jbd2,
# ksoftirqd), and the share of the machine left idle. cpu.sh counts only the server's
# threads; this shows the load generator's share of the two cores beside it, which bounds
# how fast any server can be measured here. Each run: a fresh server, a 600,000-SET fill,
# then N SETs measured (redis-benchmark -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2).
# CPU times from /proc (user + system ticks); the load generator's from the shell's `times`
# (its user and system time, counted by the kernel when it exits).
# usage: bench/kv/system_cpu.sh ROUNDS TAILSTORE_BINARY
# env: WORK, PORT; N SETs measured (default 600,000).
ROUNDS=${1:?usage: system_cpu.sh ROUNDS TAILSTORE_BINARY}
BIN=${2:?usage: system_cpu.sh ROUNDS TAILSTORE_BINARY}
. "$(dirname "$0")/servers.sh"
lone_defaults system-cpu 7114
N=${N:-600000}
need redis-server; need redis-benchmark
TICK_US=$((1000000 / $(getconf CLK_TCK)))

load() {
  redis-benchmark -p "$PORT" -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2 -n "$1" -q 2>&1 |
    tr '\r' '\n' | grep 'requests per' | awk '{print $2}'
}

# Ticks of the kernel's own threads (writeback, journal, soft interrupts).
kernel_ticks() {
  local total=0 task name ticks
  for task in /proc/[0-9]*; do
    name=$(cat "$task/comm" 2>/dev/null) || continue
    case $name in
      kworker* | jbd2* | ksoftirqd* | flush-*)
        ticks=$(cpu_ticks "$task" 2>/dev/null) || continue
        total=$((total + ticks))
        ;;
    esac
  done
  echo "$total"
}

idle_ticks() { awk '/^cpu / {print $5 + $6}' /proc/stat; }
all_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }

# Seconds in `times`' second line (the children's user and system time), added up.
children_seconds() {
  sed -n 2p "$1" | tr 'ms' '  ' | awk '{print $1 * 60 + $2 + $3 * 60 + $4}'
}

# One measured run against the server on PORT whose pid is $1, labelled $2.
measure() {
  local server=$1 label=$2 s0 s1 k0 k1 i0 i1 a0 a1 generator
  load 600000 >/dev/null
  s0=$(cpu_ticks "/proc/$server"); k0=$(kernel_ticks); i0=$(idle_ticks); a0=$(all_ticks)
  ( load "$N" >"$WORK/rate"; times >"$WORK/times" )
  s1=$(cpu_ticks "/proc/$server"); k1=$(kernel_ticks); i1=$(idle_ticks); a1=$(all_ticks)
  generator=$(echo "scale=2; $(children_seconds "$WORK/times") * 1000000 / $N" | bc)
  per_set() { echo "scale=2; $1 * $TICK_US / $N" | bc; }
  printf '%-10s %10s SET/s   server %5s µs/SET   redis-benchmark %5s   kernel threads %5s   idle %4s%%\n' \
    "$label" "$(cat "$WORK/rate")" "$(per_set $((s1 - s0)))" "$generator" \
    "$(per_set $((k1 - k0)))" "$(echo "scale=1; 100 * ($i1 - $i0) / ($a1 - $a0)" | bc)"
}

for round in $(seq "$ROUNDS"); do
  echo "round $round, $(date -u +%H:%M:%S) UTC"
  stop_lone
  start_lone "$BIN" serve
  measure "$LONE" tailstore
  stop_lone
  mkdir -p "$WORK"
  redis-server --port "$PORT" --save '' --appendonly no --dir "$WORK" --daemonize no \
    >"$WORK/redis.log" 2>&1 &
  redis=$!
  answers -p "$PORT"
  measure "$redis" redis-none
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$redis" 2>/dev/null || true
done
