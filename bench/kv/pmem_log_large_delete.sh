#!/usr/bin/env bash
# A DEL whose record is longer than `pmem-log` takes (ARCHITECTURE.md, decision 137): on
# `serve --commit pmem-log` (768 MiB region, records of up to 64 MiB) with 500,000 keys of
# 100-byte values, three DELs of 160,000, 180,000 and 150,000 keys. The later ones empty
# most leaves of the keys' trees, and each merge logs page images: the third DEL's record
# is ~72 MB for ~13 MB of writes. Before decision 137 the server refused that record after
# applying it and stopped accepting writes; now it is split as in the other modes
# (`wal.rs`, "Commits in parts"), which first drops the ops that a later image of the same
# page makes redundant (here enough for one record), else appends it in parts. Then
# SIGKILL, a restart, and DBSIZE and reads of kept and deleted keys.
# usage: bench/kv/pmem_log_large_delete.sh TAILSTORE_BINARY [PORT]   (needs redis-cli, python3)
set -u
BIN=${1:?usage: pmem_log_large_delete.sh TAILSTORE_BINARY [PORT]}
PORT=${2:-7297}
d=$(mktemp -d /var/tmp/tailstore-pmem-log-delete.XXXX)
pmem=/dev/shm/$(basename "$d").pmem
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$d" "$pmem"*' EXIT
cli() { redis-cli -p "$PORT" "$@"; }
serve() {
    "$BIN" serve --db "$d" --commit pmem-log --pmem "$pmem" --listen "127.0.0.1:$PORT" >> "$d/serve.log" 2>&1 &
    pid=$!
    until cli PING > /dev/null 2>&1; do sleep 0.1; done
}
serve
python3 "$(dirname "$0")/fill_keys.py" 500000 | cli --pipe | tail -1
for range in "0 160000" "160000 340000" "340000 490000"; do
    python3 - "$PORT" $range <<'PY'
import socket, sys, time
port, a, b = (int(x) for x in sys.argv[1:])
keys = [b"key:%d" % i for i in range(a, b)]
request = b"*%d\r\n$3\r\nDEL\r\n" % (len(keys) + 1) + b"".join(b"$%d\r\n%s\r\n" % (len(k), k) for k in keys)
conn = socket.create_connection(("127.0.0.1", port))
began = time.perf_counter()
conn.sendall(request)
reply = b""
while not reply.endswith(b"\r\n"):
    chunk = conn.recv(4096)
    if not chunk:
        break
    reply += chunk
print(f"DEL key:{a}..key:{b - 1} -> {reply.decode().strip()} ({time.perf_counter() - began:.2f} s)")
PY
    cli INFO persistence | grep -E "tailstore_log_bytes|tailstore_commits_in_parts" | tr -d '\r' | tr '\n' ' '; echo
done
echo "a SET after: $(cli SET after 1)"; sleep 1; cli INFO persistence | grep -E "tailstore_log_bytes|tailstore_commits_in_parts" | tr -d "\r" | tr "\n" " "; echo
kill -9 $pid; wait $pid 2>/dev/null
serve
grep "opened in" "$d/serve.log" | tail -1
echo "after SIGKILL and restart: DBSIZE $(cli DBSIZE), GET key:1 '$(cli GET key:1)', GET key:499999 $(cli GET key:499999 | cut -c1-3)…, GET after $(cli GET after)"
