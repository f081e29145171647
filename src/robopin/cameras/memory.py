"""Keep freed image buffers in the process, so per-frame allocations do not fault fresh pages in."""

# Every published or received frame allocates a few megabyte-sized buffers (numpy arrays, the
# ``array.array`` behind ``sensor_msgs/Image.data``, DDS sample buffers) and frees them a frame later.
# glibc hands such blocks back to the kernel on free (``mmap`` above its mmap threshold, and trimming or
# ``madvise(MADV_DONTNEED)`` of thread arenas above its trim threshold), so the next frame page-faults
# the same amount in again (benchmarks/bench_cameras.py measures the cost).
# :func:`retain_freed_image_memory` raises both thresholds once per process; a process that moves
# images calls it at start. Without glibc (musl, macOS) it does nothing.

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading

__all__ = ["retain_freed_image_memory"]

logger = logging.getLogger(__name__)

# mallopt parameter numbers from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# 32 MiB is the ceiling glibc itself lets its dynamic mmap threshold reach on 64-bit
# (DEFAULT_MMAP_THRESHOLD_MAX): blocks below it — every image up to 4K float32 depth — come from the
# heap. Up to 128 MiB of freed heap stays mapped: a few frames of several cameras, bounded, and reused
# at once by the next frame.
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 128 * 1024 * 1024

_lock = threading.Lock()
_applied: bool | None = None


def retain_freed_image_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (idempotent); return whether it applied.

    Setting them also switches off glibc's dynamic threshold adjustment, which is what lets a steady
    stream of equally sized frames settle into reusing the same memory.
    """
    global _applied
    with _lock:
        if _applied is not None:
            return _applied
        _applied = False
        name = ctypes.util.find_library("c")
        if name is None:
            return False
        try:
            libc = ctypes.CDLL(name)
            mallopt = libc.mallopt
        except (OSError, AttributeError):  # not glibc
            return False
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        # mallopt returns 1 on success, 0 on a rejected value.
        _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
            mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        )
        if not _applied:
            logger.warning("glibc rejected the image-buffer malloc thresholds; frames will fault memory in anew")
        return _applied
