"""Writes to stdout, as RESP for `redis-cli --pipe`, SETs of key:0 .. key:N-1 to 100-byte
values (N from the first argument, default 500,000): the data of the scripts that need a
large keyspace before one large command (commit_in_parts.sh, pmem_log_large_delete.sh)."""
import sys

count = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
out, value = sys.stdout.buffer, b"v" * 100
for i in range(count):
    key = b"key:%d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(key), key, value))
