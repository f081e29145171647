"""A robopin command that dies of a fatal signal names its threads' stacks, and a failing test shows them whole."""

from __future__ import annotations

import subprocess
import sys

from tests.process_output import FATAL_MARK, output_tail

# The robopin CLI turns faulthandler on; then 40 threads wait on a lock three calls deep (a dump longer than a
# test's usual 4000-character tail, the crashing thread's stack first as CPython writes it) and the main
# thread crashes with faulthandler._sigsegv, CPython's own way to raise SIGSEGV for such tests.
_CRASH = """
import faulthandler, sys, threading
from robopin.cli import main
assert main([]) == 2 and faulthandler.is_enabled()
hold = threading.Lock(); hold.acquire()
def deeper(n):
    return deeper(n - 1) if n else hold.acquire()
threads = [threading.Thread(target=deeper, args=(3,), daemon=True) for _ in range(40)]
for thread in threads: thread.start()
print("x" * 20000, file=sys.stderr, flush=True)
faulthandler._sigsegv()
"""


def test_a_robopin_process_that_segfaults_shows_every_threads_stack_in_the_failing_tests_output():
    result = subprocess.run([sys.executable, "-c", _CRASH], capture_output=True, text=True, timeout=120)
    assert result.returncode == -11, result.stderr[-2000:]
    assert FATAL_MARK in result.stderr
    assert FATAL_MARK not in result.stderr[-4000:]  # the dump is longer than a plain tail keeps
    shown = output_tail(result.stdout, result.stderr)
    assert "Fatal Python error: Segmentation fault" in shown
    assert "Current thread" in shown and shown.count("in deeper") >= 40
