#!/usr/bin/env bash
# Restarts of several binaries on one crash image, so that each replays exactly the same log.
# IMAGE_BINARY's `serve --commit buffer` takes `redis-benchmark -t set -d 4096 -r 100000 -c 50
# -P 16 --threads 2` until its replay weight since the checkpoint passes KILLAT MiB (default
# 470), is killed with SIGKILL, and its files are kept. Each round then restarts every BINARY
# on a fresh copy of them (interleaved): warm, or with COLD=1 after `sync` and drop_caches
# (root), as after a power cut with the log's tail in real PMEM. Before each restart a 1.5 GiB
# `dd` buffer is touched and freed, so that every restart starts with the machine's memory in
# the same state (on this VM, memory the guest has not touched lately costs several times as
# much to fault in). Prints, per restart, the open's time ("opened in"), the server's CPU
# until its first reply (user + system, 10 ms ticks) and the machine's steal ticks meanwhile
# (time the host gave our cores to others: a round with steal is slower for that reason);
# then the medians. With KEEP_IMAGE=DIR the image is kept in DIR and, when DIR already holds
# one, reused instead of made (IMAGE_BINARY is then not run): the same crash, say one whose
# log tail in PMEM was long, can be restarted again in a later run. The server's "opened in"
# line says how much of the log was only in PMEM. With LOAD=bar the image is instead the
# restart bar's crash: 262,144 new keys of 4 KiB (1 GiB, the load of `tailstore kv compare
# --restart-data-mb 1024`, from `tailstore bench kv`), then SIGKILL (KILLAT is not used).
# With LOG_COLD=1 each restart starts with the log file out of the page cache and the data
# file in it, as after a real SIGKILL (the log writer writes around the cache, decision 99;
# copying the image would otherwise leave the log cached, and a restart read it from memory:
# about half the time of one that reads it from the disk). With BEHIND=1 each restart also measures
# the redo a server leaves to the background (decision 95): one client's GETs
# (`redis-benchmark -t get -r 100000 -n 5000 -c 1 -P 1`) right after the first reply, the
# time from the spawn until `INFO persistence` says no page is left to redo, the server's CPU
# by then, and the same GETs once more (printed on stderr, one line per restart).
#   bench/kv/replay_image.sh ROUNDS IMAGE_BINARY BINARY...
#   (env: KILLAT, LOAD, COLD, LOG_COLD, WORK, PORT, KEEP_IMAGE, BEHIND)
ROUNDS=${1:?usage: replay_image.sh ROUNDS IMAGE_BINARY BINARY...}
IMAGE_BIN=${2:?usage: replay_image.sh ROUNDS IMAGE_BINARY BINARY...}
shift 2
. "$(dirname "$0")/servers.sh"
need redis-cli; need redis-benchmark
lone_defaults replay-image 7126
if [ -n "${COLD:-}" ] && [ ! -w /proc/sys/vm/drop_caches ]; then
  echo "error: COLD=1 needs root (drop_caches)" >&2
  exit 1
fi
if [ -n "${KEEP_IMAGE:-}" ]; then
  IMAGE=$KEEP_IMAGE
  trap 'stop_lone' EXIT
else
  IMAGE=$WORK-image
  trap 'stop_lone; rm -rf "$IMAGE"' EXIT
fi

make_image() {
  start_lone "$IMAGE_BIN" first
  if [ "${LOAD:-}" = bar ]; then
    bar_load
  else
    overwrite_load
  fi
  local since
  since=$(replay_weight)
  kill -9 "$LONE"; wait "$LONE" 2>/dev/null || true
  rm -rf "$IMAGE"; mkdir -p "$IMAGE"
  cp -a "$WORK/db" "$IMAGE/db"; cp -a "$PMEM" "$PMEM.pages" "$IMAGE/"
  echo "image: killed with $((${since:-0} >> 20)) MiB of replay weight since the checkpoint"
}

replay_weight() {
  redis-cli -p "$PORT" info persistence | tr -d '\r' |
    grep -E '^tailstore_replay_weight_since_checkpoint:' | cut -d: -f2
}

# The restart bar's load: every key of 262,144 written once, 4 KiB each.
bar_load() {
  "$IMAGE_BIN" bench kv --server "127.0.0.1:$PORT" --clients 50 --threads 1 --pipeline 4 \
    --ratio 1:0 --data-size 4096 --key-space 262144 --key-pattern sequential \
    --requests $((262144 / 50 + 1)) >/dev/null
}

# Overwrites of 100,000 keys until the replay weight passes KILLAT MiB.
overwrite_load() {
  redis-benchmark -p "$PORT" -t set -d 4096 -r 100000 -n 100000000 -c 50 -P 16 --threads 2 -q \
    >/dev/null 2>&1 &
  local load=$! since=0
  for _ in $(seq 300); do
    sleep 0.2
    since=$(replay_weight)
    [ "${since:-0}" -gt $((${KILLAT:-470} << 20)) ] && break
  done
  kill "$load" 2>/dev/null || true; wait "$load" 2>/dev/null || true
}

# One restart of $1 on a fresh copy of the image: "ms cpu_ticks steal_ticks pmem_tail_bytes"
# (the last 0 from a binary that does not report the tail).
restart_on_copy() {
  rm -rf "$WORK/db" "$PMEM" "$PMEM.pages"
  mkdir -p "$WORK"
  cp -a "$IMAGE/db" "$WORK/db"; cp -a "$IMAGE/$(basename "$PMEM")" "$IMAGE/$(basename "$PMEM").pages" /dev/shm/
  sync
  dd if=/dev/zero of=/dev/null bs=1536M count=1 2>/dev/null
  [ -n "${COLD:-}" ] && echo 3 >/proc/sys/vm/drop_caches
  # Drops the log file's pages from the page cache (coreutils: nocache with count=0).
  [ -n "${LOG_COLD:-}" ] && dd if="$WORK/db/tailstore.log" iflag=nocache count=0 status=none
  local before after proc spawned
  read -ra before < <(head -1 /proc/stat)
  spawned=$(date +%s%N)
  start_lone "$1" restart
  read -ra after < <(head -1 /proc/stat)
  read -ra proc <"/proc/$LONE/stat"
  local ms tail
  ms=$(grep -o 'opened in [0-9.]*' "$WORK/restart.log" | awk '{print $3}')
  tail=$(grep -o "last [0-9]* bytes were only in" "$WORK/restart.log" | awk '{print $2}')
  echo "$ms $((proc[13] + proc[14])) $((after[8] - before[8])) ${tail:-0}"
  [ -z "${BEHIND:-}" ] || redo_behind "$1" "$spawned" >&2
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$LONE" 2>/dev/null || true
}

# BEHIND=1's measurements of the restart of $1 spawned at $2 (ns).
redo_behind() {
  local gets=(-p "$PORT" -t get -r 100000 -n 5000 -c 1 -P 1 -d 4096)
  local during left done_at proc after
  during=$(benchmark "${gets[@]}")
  left=$(pages_left_to_redo)
  for _ in $(seq 3000); do [ "$(pages_left_to_redo)" = 0 ] && break; sleep 0.01; done
  done_at=$(date +%s%N)
  read -ra proc <"/proc/$LONE/stat"
  after=$(benchmark "${gets[@]}")
  echo "  $(basename "$1"): GETs after the first reply: $during ($left pages then left to redo);" \
    "redo done $(((done_at - $2) / 1000000)) ms after the spawn, $((proc[13] + proc[14])) ticks" \
    "of CPU; GETs then: $after"
}

pages_left_to_redo() {
  redis-cli -p "$PORT" info persistence | tr -d '\r' | awk -F: '/^tailstore_pages_left_to_redo:/ {print $2}'
}

MODE=$(if [ -n "${COLD:-}" ]; then echo "cold page cache"
  elif [ -n "${LOG_COLD:-}" ]; then echo "log not cached, data file cached"
  else echo "warm page cache"; fi)
if [ -n "${KEEP_IMAGE:-}" ] && [ -d "$IMAGE/db" ]; then
  echo "image: reusing $IMAGE"
else
  make_image
fi
declare -A results
for round in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    r=$(restart_on_copy "$bin")
    read -r ms cpu steal tail <<<"$r"
    echo "round $round $(basename "$bin"): opened in $ms ms; cpu, steal ticks: $cpu $steal;" \
      "log only in PMEM: $tail bytes"
    results[$bin]+="$r"$'\n'
  done
done
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for bin in "$@"; do
  ms=$(printf '%s' "${results[$bin]}" | awk 'NF {print $1}' | median)
  cpu=$(printf '%s' "${results[$bin]}" | awk 'NF {print $2}' | median)
  echo "$(basename "$bin"): median ${ms} ms to open, ${cpu} ticks of CPU ($MODE)"
done
