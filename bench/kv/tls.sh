#!/usr/bin/env bash
# What TLS costs (decision 155): the throughput bar's load (4 KiB SETs, -c 50 -P 4
# --threads 2) and the one-client latency load (-c 1 -P 1) against Redis without
# persistence and `tailstore serve --commit buffer`, each once in plain TCP and once with
# TLS (a certificate made here with openssl), rounds interleaved, each run after the
# machine has settled. Redis's TLS is its own (OpenSSL); tailstore's is rustls.
# usage: bench/kv/tls.sh TAILSTORE_BINARY [ROUNDS]   (env: WORK, BASE; N SETs per throughput
# run, default 1,000,000)
BIN=${1:?usage: tls.sh TAILSTORE_BINARY [ROUNDS]}
ROUNDS=${2:-3}
WORK=${WORK:-/var/tmp/tailstore-tls}
BASE=${BASE:-7131}
N=${N:-1000000}
. "$(dirname "$0")/servers.sh"
need redis-server; need redis-cli; need redis-benchmark; need openssl
[ -x "$BIN" ] || { echo "error: $BIN is not an executable tailstore binary" >&2; exit 1; }

REDIS=$BASE; REDIS_TLS=$((BASE + 1)); PLAIN=$((BASE + 2)); TLS=$((BASE + 3))
PMEM_PLAIN=/dev/shm/tailstore-tls-$PLAIN.pmem
PMEM_TLS=/dev/shm/tailstore-tls-$TLS.pmem
stop() {
  for p in $REDIS $PLAIN; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  for p in $REDIS_TLS $TLS; do
    redis-cli -p "$p" --tls --cacert "$WORK/ca.crt" shutdown nosave >/dev/null 2>&1 || true
  done
  sleep 0.5
  rm -f "$PMEM_PLAIN" "$PMEM_PLAIN.pages" "$PMEM_TLS" "$PMEM_TLS.pages"
}
stop
rm -rf "$WORK" && mkdir -p "$WORK/redis" "$WORK/redis-tls"
trap 'stop; [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT

# A CA and a server certificate for 127.0.0.1 (v3, with its subject alternative name).
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=tailstore bench CA" \
  -keyout "$WORK/ca.key" -out "$WORK/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$WORK/server.key" -out "$WORK/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$WORK/san.cnf"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" \
  -CAcreateserial -days 2 -extfile "$WORK/san.cnf" -out "$WORK/server.crt" 2>/dev/null

redis-server --port "$REDIS" --save '' --appendonly no --dir "$WORK/redis" \
  --daemonize yes --logfile "$WORK/redis/log" >/dev/null
redis-server --port 0 --tls-port "$REDIS_TLS" --tls-cert-file "$WORK/server.crt" \
  --tls-key-file "$WORK/server.key" --tls-ca-cert-file "$WORK/ca.crt" --tls-auth-clients no \
  --save '' --appendonly no --dir "$WORK/redis-tls" --daemonize yes \
  --logfile "$WORK/redis-tls/log" >/dev/null
"$BIN" serve --commit buffer --db "$WORK/plain" --pmem "$PMEM_PLAIN" \
  --listen "127.0.0.1:$PLAIN" >"$WORK/plain.log" 2>&1 &
"$BIN" serve --commit buffer --db "$WORK/tls" --pmem "$PMEM_TLS" --listen "127.0.0.1:$TLS" \
  --tls-cert-file "$WORK/server.crt" --tls-key-file "$WORK/server.key" >"$WORK/tls.log" 2>&1 &

# redis-benchmark's and redis-cli's options for the server on port $1.
options() {
  case $1 in
    "$REDIS_TLS" | "$TLS") echo "-p $1 --tls --cacert $WORK/ca.crt" ;;
    *) echo "-p $1" ;;
  esac
}
# shellcheck disable=SC2046
for p in $REDIS $REDIS_TLS $PLAIN $TLS; do answers $(options "$p"); done
echo "servers: Redis :$REDIS, Redis TLS :$REDIS_TLS, tailstore :$PLAIN, tailstore TLS :$TLS ($("$BIN" --version)); $(date -u +%H:%M) UTC"

run() {
  local what=$1
  shift
  echo "== redis-benchmark $* (PORT and, for TLS, --tls --cacert CA)"
  for r in $(seq "$ROUNDS"); do for p in $REDIS $REDIS_TLS $PLAIN $TLS; do
    settled=$(settle)
    # shellcheck disable=SC2046
    echo "$what round $r port $p (settled in $settled): $(benchmark $(options "$p") "$@")"
  done; done
}
run throughput -t set -d 4096 -r 100000 -c 50 -P 4 --threads 2 -n "$N"
run latency -t set -d 4096 -r 100000 -c 1 -P 1 -n 50000
