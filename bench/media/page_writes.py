#!/usr/bin/env python3
"""CPU and wall time per 16 KiB page written at random page offsets of a 1 GiB file, the way
the checkpointer writes a data file: buffered `pwrite` with an `fdatasync` every 2,048 pages
(the checkpointer syncs when half of the 64 MiB double-write area has filled), against
`O_DIRECT` `pwrite` at queue depth 1 (what writing pages around the page cache would cost
without several writes in flight). CPU is this process's user + system time (getrusage): the
writeback that `fdatasync` does runs in this process; what the kernel's flusher threads do
on their own is not counted, so the buffered figure is a floor.

usage: bench/media/page_writes.py DIR [PAGES (default 20,000)] [ROUNDS (default 3)]
"""
import mmap
import os
import random
import resource
import sys
import time

PAGE = 16384
FILE_PAGES = 65536  # 1 GiB
SYNC_EVERY = 2048


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(path, name, flags, sync_every, offsets, page):
    fd = os.open(path, os.O_RDWR | flags)
    cpu0, wall0 = cpu_seconds(), time.monotonic()
    for i, offset in enumerate(offsets):
        os.pwrite(fd, page, offset)
        if sync_every and (i + 1) % sync_every == 0:
            os.fdatasync(fd)
    os.fdatasync(fd)
    cpu1, wall1 = cpu_seconds(), time.monotonic()
    os.close(fd)
    n = len(offsets)
    print(f"{name:9s} {1e6 * (cpu1 - cpu0) / n:6.2f} µs CPU per page, "
          f"{1e6 * (wall1 - wall0) / n:7.2f} µs wall per page")


def main():
    if len(sys.argv) < 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: page_writes.py DIR [PAGES] [ROUNDS]  (DIR: an existing directory on the disk to test)")
    pages = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    path = os.path.join(sys.argv[1], "tailstore-page-writes.dat")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, PAGE * FILE_PAGES)
        os.fsync(fd)
        os.close(fd)
        page = mmap.mmap(-1, PAGE)  # page-aligned, as O_DIRECT needs
        page.write(os.urandom(PAGE))
        rng = random.Random(1)
        offsets = [rng.randrange(FILE_PAGES) * PAGE for _ in range(pages)]
        print(f"{pages} random 16 KiB pages of a 1 GiB file in {sys.argv[1]}, {rounds} rounds")
        for _ in range(rounds):
            run(path, "buffered", 0, SYNC_EVERY, offsets, page)
            run(path, "O_DIRECT", os.O_DIRECT, 0, offsets, page)
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
