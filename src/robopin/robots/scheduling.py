"""The calling thread's scheduling policy as glibc sees it, and a guard that gives it back."""

# libfranka (inside ``franky.Robot()``) switches its calling thread to SCHED_FIFO 99 with
# ``pthread_setschedparam``, which also records the policy in glibc's thread descriptor. Restoring it
# with the raw system call (``os.sched_setscheduler``) fixes the kernel's view only: threads created
# later inherit glibc's recorded values, and libraries that re-apply "the current policy" to their new
# threads (Fast DDS does, for every participant thread) come up real-time. So both the reading and the
# restoring here go through pthreads.

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator

__all__ = ["caller_scheduling_kept", "set_thread_scheduling", "thread_scheduling"]


class _SchedParam(ctypes.Structure):
    _fields_ = [("sched_priority", ctypes.c_int)]


def _pthread():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.pthread_self.restype = ctypes.c_ulong
        libc.pthread_getschedparam.argtypes = [ctypes.c_ulong, ctypes.POINTER(ctypes.c_int),
                                               ctypes.POINTER(_SchedParam)]
        libc.pthread_setschedparam.argtypes = [ctypes.c_ulong, ctypes.c_int, ctypes.POINTER(_SchedParam)]
        return libc
    except (OSError, AttributeError):  # no pthreads (not Linux/glibc-like): nothing to keep
        return None


_LIBC = _pthread()


def thread_scheduling() -> tuple[int, int] | None:
    """``(policy, priority)`` of the calling thread as pthreads records it, or None where unavailable."""
    if _LIBC is None:
        return None
    policy, param = ctypes.c_int(), _SchedParam()
    if _LIBC.pthread_getschedparam(_LIBC.pthread_self(), ctypes.byref(policy), ctypes.byref(param)) != 0:
        return None
    return policy.value, param.sched_priority


def set_thread_scheduling(policy: int, priority: int) -> None:
    """Set the calling thread's policy and priority through pthreads (kernel and glibc agree after)."""
    if _LIBC is None:
        return
    result = _LIBC.pthread_setschedparam(_LIBC.pthread_self(), policy, ctypes.byref(_SchedParam(priority)))
    if result != 0:
        raise OSError(result, f"pthread_setschedparam({policy}, {priority}): {os.strerror(result)}")


@contextlib.contextmanager
def caller_scheduling_kept() -> Iterator[None]:
    """Run the body, then put the calling thread's scheduling policy back if the body changed it."""
    before = thread_scheduling()
    try:
        yield
    finally:
        if before is not None and thread_scheduling() != before:
            set_thread_scheduling(*before)
