#!/usr/bin/env python3
"""What the first write to fresh anonymous memory costs this machine, with transparent huge
pages (2 MiB, `MADV_HUGEPAGE`, as mimalloc asks for its arenas and so for the buffer pool's
frames) and without (4 KiB pages, `MADV_NOHUGEPAGE`): the time to write one byte in every
4 KiB of a new mapping, which is the kernel's page faults and page clearing (and, in a
virtual machine, the host's work to back memory the guest had given back).

Each round maps SIZE MiB twice, once per page size, touches it and unmaps it; rounds are
PAUSE seconds apart, so that memory freed by one round has been handed back to the host
(free page reporting) before the next. `--reuse` runs a second touch of each kind at once
after the first, on memory the process has just freed (not yet handed back).

usage: bench/media/first_touch.py [SIZE_MIB (default 512)] [ROUNDS (default 3)]
                                  [PAUSE_S (default 5)] [--reuse]
"""
import mmap
import sys
import time

HUGE = 2 << 20
SMALL = 4096


def touch(size, advice):
    """Seconds to write one byte per 4 KiB of a fresh mapping of `size` bytes."""
    # The mapping's start need not be 2 MiB-aligned: its first and last partial 2 MiB
    # windows get 4 KiB pages, the rest huge ones.
    area = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        view = memoryview(area)
        area.madvise(advice)
        began = time.perf_counter()
        for offset in range(0, size, SMALL):
            view[offset] = 1
        elapsed = time.perf_counter() - began
        view.release()
        return elapsed
    finally:
        area.close()


def show(kind, size, seconds):
    rate = size / seconds / 1e9
    return f"{kind} {seconds * 1e3:7.0f} ms ({rate:5.2f} GB/s)"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    reuse = "--reuse" in sys.argv[1:]
    size = int(args[0] if len(args) > 0 else 512) << 20
    rounds = int(args[1] if len(args) > 1 else 3)
    pause = float(args[2] if len(args) > 2 else 5)
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        sys.exit("first_touch.py: this Python's mmap has no MADV_HUGEPAGE (Linux only)")
    for r in range(1, rounds + 1):
        if r > 1:
            time.sleep(pause)
        line = [show("2 MiB pages", size, touch(size, mmap.MADV_HUGEPAGE))]
        if reuse:
            line.append(show("again", size, touch(size, mmap.MADV_HUGEPAGE)))
        time.sleep(pause)
        line.append(show("4 KiB pages", size, touch(size, mmap.MADV_NOHUGEPAGE)))
        if reuse:
            line.append(show("again", size, touch(size, mmap.MADV_NOHUGEPAGE)))
        print(f"round {r}: {size >> 20} MiB, " + "; ".join(line), flush=True)


if __name__ == "__main__":
    main()
