#!/usr/bin/env bash
# A transaction whose log record is longer than the log takes (ARCHITECTURE.md, decision 134):
# on `serve --commit fsync` with 500,000 keys of 100-byte values, right after a checkpoint
# (SAVE), one MULTI/EXEC of 4,000 SETs spread over every leaf. Each leaf's first change since
# the checkpoint logs a full image of the leaf, so the block's record is ~65 MB against the
# 32 MiB the server's 64 MiB ring takes. Before decision 134 the server refused the record
# after applying it and stopped accepting writes; now it logs the commit in parts. Then
# SIGKILL, a restart, and reads of keys the block wrote and did not write.
# With POOL=64MiB BLOCK=8000 the block's ~4,300 leaves are more than the pool's 4,096 frames
# hold (decision 135): before, the server stopped ("buffer pool exhausted"); now EXEC is
# refused with "transaction too large" and nothing changes.
# usage: bench/kv/commit_in_parts.sh TAILSTORE_BINARY [PORT]    (env: POOL, BLOCK;
#        needs redis-cli, python3)
set -u
BIN=${1:?usage: commit_in_parts.sh TAILSTORE_BINARY [PORT]}
PORT=${2:-7295}
POOL=${POOL:-1GiB}
BLOCK=${BLOCK:-4000}
d=$(mktemp -d /var/tmp/tailstore-commit-in-parts.XXXX)
trap 'kill $pid 2>/dev/null; rm -rf "$d"' EXIT
cli() { redis-cli -p "$PORT" "$@"; }
serve() {
    "$BIN" serve --db "$d" --commit fsync --buffer-pool "$POOL" --listen "127.0.0.1:$PORT" >> "$d/serve.log" 2>&1 &
    pid=$!
    until cli PING > /dev/null 2>&1; do sleep 0.1; done
}
serve
python3 "$(dirname "$0")/fill_keys.py" 500000 | cli --pipe | tail -1
echo "SAVE: $(cli SAVE)"
new=$(printf 'w%.0s' $(seq 100))
(echo MULTI; for i in $(seq 0 $((BLOCK - 1))); do echo "SET key:$((i * 500000 / BLOCK)) $new"; done; echo EXEC) \
    | cli > "$d/exec.out"
echo "EXEC: $(grep -c '^OK$' "$d/exec.out") OK (MULTI's and the block's); other replies: $(grep -v '^OK$\|^QUEUED$' "$d/exec.out" | head -1)"
echo "a SET after it: $(cli SET after 1)"
cli INFO persistence | grep -E "tailstore_commits_in_parts"
kill -9 $pid; wait $pid 2>/dev/null
serve
grep "opened in" "$d/serve.log" | tail -1
echo "after SIGKILL and restart: GET key:$((500000 / BLOCK)) $(cli GET key:$((500000 / BLOCK)) | cut -c1-3)…, key:499875 $(cli GET key:499875 | cut -c1-3)…, key:1 $(cli GET key:1 | cut -c1-3)…, after $(cli GET after), DBSIZE $(cli DBSIZE)"
