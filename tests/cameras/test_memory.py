"""retain_freed_image_memory: this glibc accepts the thresholds, once per process."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

from robopin.cameras.memory import retain_freed_image_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or ctypes.util.find_library("c") is None,
                    reason="the thresholds are glibc's")
def test_glibc_accepts_the_image_buffer_thresholds_once_per_process():
    assert retain_freed_image_memory() is True
    assert retain_freed_image_memory() is True  # idempotent: the first answer is kept
