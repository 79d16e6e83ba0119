# Shared by the scripts here: start Redis without persistence (port BASE), Redis with
# `appendfsync always` (BASE+1) and `tailstore serve --commit buffer` (BASE+2), each fresh in
# its own directory under WORK (PMEM emulated in /dev/shm), and stop them on exit, removing
# WORK too (GBs after a throughput run) unless KEEP=1.
# Needs redis-server, redis-cli and redis-benchmark on the PATH.

set -euo pipefail

# Waits (at most 10 s) until redis-cli, given these options (-p PORT, -s SOCKET, --tls …),
# gets an answer to PING; stops the script if it never does.
answers() {
  for _ in $(seq 100); do redis-cli "$@" ping >/dev/null 2>&1 && return; sleep 0.1; done
  redis-cli "$@" ping >/dev/null || { echo "error: no server answers redis-cli $*" >&2; exit 1; }
}

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "error: $1 is not installed (it is the baseline)" >&2; exit 1; }
}

start_servers() {
  local bin=$1
  need redis-server; need redis-cli; need redis-benchmark
  [ -x "$bin" ] || { echo "error: $bin is not an executable tailstore binary" >&2; exit 1; }
  NONE=$BASE; ALWAYS=$((BASE + 1)); TAILSTORE=$((BASE + 2))
  PMEM=/dev/shm/tailstore-bench-$TAILSTORE.pmem
  stop_servers
  rm -rf "$WORK" "$PMEM" "$PMEM.pages" && mkdir -p "$WORK/none" "$WORK/always" "$WORK/tailstore"
  redis-server --port "$NONE" --save '' --appendonly no --dir "$WORK/none" \
    --daemonize yes --logfile "$WORK/none/log" >/dev/null
  redis-server --port "$ALWAYS" --save '' --appendonly yes --appendfsync always \
    --dir "$WORK/always" --daemonize yes --logfile "$WORK/always/log" >/dev/null
  "$bin" serve --commit buffer --db "$WORK/tailstore/db" --pmem "$PMEM" \
    --listen "127.0.0.1:$TAILSTORE" >"$WORK/tailstore/log" 2>&1 &
  trap 'stop_servers; [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT
  for port in "$NONE" "$ALWAYS" "$TAILSTORE"; do
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$port" ping >/dev/null || { echo "error: no server answers on port $port" >&2; exit 1; }
  done
  echo "servers: Redis none :$NONE, Redis always :$ALWAYS, tailstore buffer :$TAILSTORE ($("$bin" --version 2>/dev/null || echo "$bin")); $(date -u +%H:%M) UTC"
}

stop_servers() {
  for port in $BASE $((BASE + 1)) $((BASE + 2)); do
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  done
  sleep 0.5
  [ -z "${PMEM:-}" ] || rm -f "$PMEM" "$PMEM.pages"
}

# One redis-benchmark run, its "requests per second" line. `-q` goes first: after a command
# of its own (`… eval SCRIPT 0`), redis-benchmark takes every word as the command's.
benchmark() {
  redis-benchmark -q "$@" 2>&1 | tr '\r' '\n' | grep 'requests per' || echo "(no result)"
}

# Waits (at most 60 s) until the machine is idle, at least 90% over half a second, and
# prints how long that took: one server's background work must not run in the next server's
# measured run. Redis with `appendonly yes` rewrites its AOF in a forked child whenever the
# file has doubled, several times in a 1,000,000-SET run; the last rewrite (~440 MB written
# and synced) ran on for ~2 s after the run ended, into the start of the run measured next.
settle() {
  local began=$(date +%s%N) cpu busy idle total prev_busy prev_total
  read -r cpu busy idle <<<"$(cpu_busy_idle)"
  for _ in $(seq 120); do
    prev_busy=$busy; prev_total=$((busy + idle))
    sleep 0.5
    read -r cpu busy idle <<<"$(cpu_busy_idle)"
    total=$((busy + idle - prev_total))
    [ "$total" -gt 0 ] && [ $((10 * (busy - prev_busy))) -le "$total" ] && break
  done
  awk -v ns=$(($(date +%s%N) - began)) 'BEGIN { printf "%.1f s", ns / 1e9 }'
}

# "cpu BUSY IDLE", the machine's jiffies since boot from /proc/stat (iowait counts as busy:
# a disk still writing someone's data is not idle either).
cpu_busy_idle() {
  awk '/^cpu / { busy = 0; for (i = 2; i <= NF; i++) if (i != 5) busy += $i; print "cpu", busy, $5 }' /proc/stat
}

# The throughput bar's command as issue 6 gives it, against the server on port $1, one line
# (fresh.sh, fresh_builds.sh; REQUESTS overrides redis-benchmark's default of 100,000).
bar_command() {
  benchmark -p "$1" -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2 -n "${REQUESTS:-100000}"
}

# ROUNDS rounds of one redis-benchmark run per server, interleaved, each after the machine
# has settled, after a header naming the arguments: `interleaved -t set -d 4096 …`.
interleaved() {
  echo "== redis-benchmark -p PORT $* -q"
  local settled
  for r in $(seq "$ROUNDS"); do for p in $NONE $ALWAYS $TAILSTORE; do
    settled=$(settle)
    echo "round $r port $p (settled in $settled): $(benchmark -p "$p" "$@")"
  done; done
}

# Writes every key that `tailstore bench kv --key-space KEYS` uses (`key:0` … ) once, 4 KiB
# values, on each of the servers PORTS, so that measured runs overwrite values, as the
# bar's redis-benchmark runs do after the first: `fill_bench_kv_keys BINARY KEYS PORTS…`.
fill_bench_kv_keys() {
  local bin=$1 keys=$2 clients=50 p
  shift 2
  for p in "$@"; do
    # Sequential keys, one thread: --requests KEYS/CLIENTS per connection writes each key once.
    "$bin" bench kv --server "127.0.0.1:$p" --clients "$clients" --threads 1 --pipeline 4 \
      --ratio 1:0 --data-size 4096 --key-space "$keys" --key-pattern sequential \
      --requests $((keys / clients)) >/dev/null
  done
}

# "total_commands_processed tailstore_read_retries tailstore_read_latched" from the `INFO
# stats` of the server on PORT (read_contention.sh, scan_contention.sh).
read_counters() {
  redis-cli -p "$PORT" info stats | tr -d '\r' |
    awk -F: '/^(total_commands_processed|tailstore_read_retries|tailstore_read_latched):/ {printf "%s ", $2}'
}

# The overall requests per second of the last progress line in file $1 (a
# redis-benchmark run stopped by `timeout`; scan_contention.sh, leaderboard.sh).
rate_of() {
  tr '\r' '\n' <"$1" | awk '/overall:/ {rate = $0} END {
    sub(/.*rps=[0-9.]+ \(overall: /, "", rate); sub(/\).*/, "", rate); print rate }'
}

# $1 per 1,000 of $2, one decimal.
per_thousand() { awk -v n="$1" -v d="$2" 'BEGIN { printf "%.1f", d ? 1000 * n / d : 0 }'; }

# For a script of lone servers named NAME: WORK (default /var/tmp/tailstore-NAME) and PORT
# (default DEFAULT_PORT) unless set, its PMEM file, and their removal on exit:
# Milliseconds from spawning `redis-cli -p PORT ARGS…` to its exit, and its reply's first line
# (dbsize.sh, flush.sh).
timed() {
  local began ended reply
  began=$(date +%s%N)
  reply=$(redis-cli -p "$PORT" "$@" | grep -v '^#' | head -1 | tr -d '\r')
  ended=$(date +%s%N)
  printf '%.1f ms (%s)' "$(echo "($ended - $began) / 1000000" | bc -l)" "$reply"
}

# `lone_defaults NAME DEFAULT_PORT`.
lone_defaults() {
  WORK=${WORK:-/var/tmp/tailstore-$1}
  PORT=${PORT:-$2}
  PMEM=/dev/shm/tailstore-$1-$PORT.pmem
  trap stop_lone EXIT
}

# A lone `tailstore serve --commit buffer` (or the mode in COMMIT) on PORT with its data in
# WORK (disk.sh, cold_restart.sh): `start_lone BINARY LOGNAME [SERVE OPTIONS…]` starts it (its
# pid in LONE) and waits for its first reply; `stop_lone` stops it and removes its files.
start_lone() {
  local bin=$1 log=$2
  shift 2
  mkdir -p "$WORK"
  "$bin" serve --commit "${COMMIT:-buffer}" --db "$WORK/db" --pmem "$PMEM" --listen "127.0.0.1:$PORT" "$@" \
    >"$WORK/$log.log" 2>&1 &
  LONE=$!
  for _ in $(seq 5000); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return; sleep 0.002; done
  echo "error: $bin does not answer on port $PORT (see $WORK/$log.log)" >&2
  exit 1
}

stop_lone() {
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  sleep 1
  rm -rf "$WORK" "$PMEM" "$PMEM.pages"
}

# CPU ticks (user + system) a process or thread has used, from its /proc directory $1 (cpu.sh,
# value_sizes.sh, budget.sh).
cpu_ticks() { awk '{print $14 + $15}' "$1/stat"; }

# "thread-name value" for every thread of process $1, the value printed by the function $2
# given the thread's /proc directory (disk.sh, cpu.sh).
by_thread() {
  for task in /proc/"$1"/task/*; do
    echo "$(tr ' ' '_' <"$task/comm") $("$2" "$task")"
  done | sort
}

# Per-thread growth between two by_thread listings (files BEFORE and AFTER) divided by N and
# multiplied by SCALE, then their total, each followed by UNIT: `per_op BEFORE AFTER N SCALE UNIT`.
per_op() {
  join "$1" "$2" | awk -v n="$3" -v scale="$4" -v unit="$5" '
    { d = ($3 - $2) * scale / n; if (d > 0) printf "    %-18s %8.2f %s\n", $1, d, unit; total += d }
    END { printf "    %-18s %8.2f %s\n", "all threads", total, unit }'
}

# A lone server of BINARY takes 1 GiB of 4 KiB values (262,144 random SETs) and is killed
# with SIGKILL, leaving its files in WORK (cold_restart.sh, restart_copies.sh):
# `crash_after_gib BINARY`.
crash_after_gib() {
  start_lone "$1" first
  redis-benchmark -p "$PORT" -t set -d 4096 -r 262144 -n 262144 -c 50 -P 4 --threads 2 -q \
    >/dev/null 2>&1
  kill -9 "$LONE"
  wait "$LONE" 2>/dev/null || true
}

# Restarts BINARY on the files in WORK and prints the ms from spawn to its first reply and
# what its open said: `timed_restart BINARY`.
timed_restart() {
  local began ended
  began=$(date +%s%N)
  start_lone "$1" restart
  ended=$(date +%s%N)
  echo "$(basename "$1"): first reply after $(((ended - began) / 1000000)) ms;" \
    "$(grep -o 'opened in.*' "$WORK/restart.log")"
}

# ROUNDS rounds of MEASURE (a function that, given a port, prints one line of figures)
# against a fresh Redis without persistence on port REDIS, then against a fresh lone
# tailstore per binary (start_lone), interleaved (lrange.sh, publish.sh):
# `rounds_against_redis ROUNDS MEASURE TAILSTORE_BINARY…`. Set the EXIT trap to
# `stop_lone; stop_plain_redis`.
rounds_against_redis() {
  local rounds=$1 measure=$2 bin round
  shift 2
  for round in $(seq "$rounds"); do
    echo "== round $round ($(date -u +%H:%M) UTC)"
    mkdir -p "$WORK/redis"
    redis-server --port "$REDIS" --save '' --appendonly no --dir "$WORK/redis" \
      --daemonize yes --logfile "$WORK/redis/log" >/dev/null
    for _ in $(seq 100); do redis-cli -p "$REDIS" ping >/dev/null 2>&1 && break; sleep 0.05; done
    echo "redis (no persistence): $("$measure" "$REDIS")"
    stop_plain_redis
    for bin in "$@"; do
      stop_lone
      start_lone "$bin" serve
      echo "$(basename "$bin"): $("$measure" "$PORT")"
      stop_lone
    done
  done
}

stop_plain_redis() { redis-cli -p "$REDIS" shutdown nosave >/dev/null 2>&1 || true; }

# Subscribers for publish.sh and notifications.sh: `start_subscribers PORT N ARGS…` starts N
# `redis-cli -p PORT ARGS…` (SUBSCRIBE ch, PSUBSCRIBE pattern), each printing to a file of
# its own; `stop_subscribers LINE` stops them a second later (the last messages arrive) and
# prints how many of the lines they printed were LINE.
start_subscribers() {
  local port=$1 n=$2 i
  shift 2
  SUBSCRIBERS=()
  mkdir -p "$WORK/subs"
  for i in $(seq "$n"); do
    redis-cli -p "$port" "$@" >"$WORK/subs/$i" &
    SUBSCRIBERS+=($!)
  done
}

stop_subscribers() {
  local received
  # (Never `wait` with no pids: it would wait for the servers started in the background.)
  if [ "${#SUBSCRIBERS[@]}" -gt 0 ]; then
    sleep 1
    kill "${SUBSCRIBERS[@]}" 2>/dev/null; wait "${SUBSCRIBERS[@]}" 2>/dev/null || true
  fi
  received=$(cat "$WORK"/subs/* 2>/dev/null | grep -c -x -- "$1" || true)
  rm -rf "$WORK/subs"
  echo "$received"
}

# One run of bench/kv/bullmq/jobs.js against the server on PORT (JOBS jobs, CONCURRENCY
# workers), its JSON line; BullMQ is installed with npm (the version bullmq/package.json
# pins) on first use: `bullmq_jobs PORT` (bullmq.sh, bullmq_builds.sh).
bullmq_jobs() {
  local dir
  dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/bullmq" && pwd)
  need node; need npm
  if [ ! -d "$dir/node_modules/bullmq" ]; then
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error) >&2
  fi
  node "$dir/jobs.js" "$1" "${JOBS:-5000}" "${CONCURRENCY:-50}"
}
