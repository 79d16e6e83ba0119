#!/usr/bin/env bash
# Commands that write many keys in one transaction (ARCHITECTURE.md, decision 136): MSET
# of N keys, DEL of those N keys, and one MULTI/EXEC of N SETs, each timed at N = 10,000,
# 20,000 and 40,000 (10-byte values) on a fresh `serve`. Every key a transaction adds or
# removes changes the database's key count (a counter row, decision 73); before decision
# 136 each change copied the count's pending change list, so these commands took time
# quadratic in N.
# usage: bench/kv/large_commands.sh TAILSTORE_BINARY|redis-server [PORT] [MODE]   (needs python3)
set -u
BIN=${1:?usage: large_commands.sh TAILSTORE_BINARY [PORT] [MODE]}
PORT=${2:-7296}
MODE=${3:-buffer}
d=$(mktemp -d /var/tmp/tailstore-large-commands.XXXX)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$d" "/dev/shm/$(basename "$d")".pmem*' EXIT
if [ "$(basename "$BIN")" = redis-server ]; then
    MODE=redis    # for scale: Redis without persistence
    "$BIN" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" > "$d/serve.log" 2>&1 &
else
    "$BIN" serve --db "$d" --commit "$MODE" --pmem "/dev/shm/$(basename "$d").pmem" \
        --listen "127.0.0.1:$PORT" > "$d/serve.log" 2>&1 &
fi
pid=$!
python3 - "$PORT" "$MODE" <<'PY'
import socket, sys, time

port, mode = int(sys.argv[1]), sys.argv[2]
for _ in range(300):
    try:
        conn = socket.create_connection(("127.0.0.1", port))
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("the server did not start")

def request(args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)

def replies(count):
    """Reads until `count` top-level replies of these commands (status, integer, error or
    an array of statuses) have arrived; returns the last line."""
    data, seen = b"", 0
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            sys.exit("the server closed the connection")
        data += chunk
        lines = data.split(b"\r\n")
        data = lines.pop()
        for line in lines:
            if line.startswith(b"*"):
                count += int(line[1:])  # an EXEC's replies count as well
            seen += 1
            if seen == count:
                return line

def timed(name, n, payload, count):
    began = time.perf_counter()
    conn.sendall(payload)
    last = replies(count)
    print(f"{mode:8} {name:12} N={n:6}  {time.perf_counter() - began:7.3f} s  last reply {last[:60].decode()}")

for n in (10_000, 20_000, 40_000):
    keys = [b"k%d:%d" % (n, i) for i in range(n)]
    timed("MSET", n, request([b"MSET"] + [x for k in keys for x in (k, b"v" * 10)]), 1)
    timed("DEL", n, request([b"DEL"] + keys), 1)
    block = [request([b"MULTI"])] + [request([b"SET", k, b"v" * 10]) for k in keys] + [request([b"EXEC"])]
    timed("MULTI/EXEC", n, b"".join(block), n + 2)
PY
