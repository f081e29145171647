"""release_free_heap gives a thread's freed, fragmented heap back to the OS (glibc malloc_trim over every arena).

The shape of the stack's soak growth (benchmarks/bench_soak.py): a worker thread allocates many small blocks
in its own arena, frees most of them but keeps a few alive, so no freed run lies at the arena's top and glibc
keeps it all resident.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

_BLOCKS, _BLOCK_BYTES = 50_000, 4000  # 200 MB in chunks below glibc's mmap threshold (128 KiB)


def _rss_mib() -> float:
    return int(re.search(r"^VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)[1]) / 1024.0


def test_freed_memory_of_a_worker_threads_arena_leaves_the_process():
    from robopin_ros.runtime import release_free_heap

    kept: list[bytearray] = []

    def work() -> None:
        blocks = [bytearray(_BLOCK_BYTES) for _ in range(_BLOCKS)]
        kept.extend(blocks[::64])  # one block in 64 stays alive: every freed run sits inside the heap
        blocks.clear()

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    held = _rss_mib()
    taken_s = release_free_heap()
    after = _rss_mib()
    print(f"\nresident {held:.0f} MiB with the freed blocks, {after:.0f} MiB after release_free_heap "
          f"({taken_s * 1e3:.1f} ms)")
    assert len(kept) == -(-_BLOCKS // 64)
    assert held - after > 100.0, (held, after)
