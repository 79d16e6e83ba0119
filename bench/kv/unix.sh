#!/usr/bin/env bash
# What a Unix domain socket saves over loopback TCP (decision 159): the one-client latency
# load (-c 1 -P 1) and the throughput bar's load (4 KiB SETs, -c 50 -P 4 --threads 2)
# against Redis without persistence and `tailstore serve --commit buffer`, each server
# listening on a port and on a Unix socket at once, rounds interleaved, each run after the
# machine has settled.
# usage: bench/kv/unix.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE; N SETs per
# throughput run, default 1,000,000)
BIN=${1:?usage: unix.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
WORK=${WORK:-/var/tmp/tailstore-unix}
BASE=${BASE:-7141}
N=${N:-1000000}
. "$(dirname "$0")/servers.sh"
need redis-server; need redis-cli; need redis-benchmark
[ -x "$BIN" ] || { echo "error: $BIN is not an executable tailstore binary" >&2; exit 1; }

REDIS=$BASE; TAILSTORE=$((BASE + 1))
PMEM=/dev/shm/tailstore-unix-$TAILSTORE.pmem
stop() {
  for p in $REDIS $TAILSTORE; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  sleep 0.5
  rm -f "$PMEM" "$PMEM.pages"
}
stop
rm -rf "$WORK" && mkdir -p "$WORK/redis"
trap 'stop; [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT

redis-server --port "$REDIS" --unixsocket "$WORK/redis.sock" --save '' --appendonly no \
  --dir "$WORK/redis" --daemonize yes --logfile "$WORK/redis/log" >/dev/null
"$BIN" serve --commit buffer --db "$WORK/tailstore" --pmem "$PMEM" \
  --listen "127.0.0.1:$TAILSTORE" --unixsocket "$WORK/tailstore.sock" >"$WORK/tailstore.log" 2>&1 &

# The four ways in: each server by its port and by its socket.
TARGETS="redis-tcp redis-unix tailstore-tcp tailstore-unix"
options() {
  case $1 in
    redis-tcp) echo "-p $REDIS" ;;
    redis-unix) echo "-s $WORK/redis.sock" ;;
    tailstore-tcp) echo "-p $TAILSTORE" ;;
    tailstore-unix) echo "-s $WORK/tailstore.sock" ;;
  esac
}
# shellcheck disable=SC2046
for t in $TARGETS; do answers $(options "$t"); done
echo "servers: Redis :$REDIS and $WORK/redis.sock, tailstore :$TAILSTORE and $WORK/tailstore.sock ($("$BIN" --version)); $(date -u +%H:%M) UTC"

run() {
  local what=$1
  shift
  echo "== redis-benchmark $* (-p PORT or -s SOCKET)"
  for r in $(seq "$ROUNDS"); do for t in $TARGETS; do
    settled=$(settle)
    # shellcheck disable=SC2046
    echo "$what round $r $t (settled in $settled): $(benchmark $(options "$t") "$@")"
  done; done
}
run latency -t set -d 4096 -r 100000 -c 1 -P 1 -n 50000
run throughput -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2 -n "$N"
