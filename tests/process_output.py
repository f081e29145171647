"""What a failing test shows of a ``robopin`` subprocess's output: the tails, and a crash report whole."""

from __future__ import annotations

# faulthandler (enabled by robopin's CLI) writes this line, then every thread's stack, when the process dies of
# SIGSEGV, SIGFPE, SIGABRT, SIGBUS or SIGILL (CPython's Modules/faulthandler.c).
FATAL_MARK = "Fatal Python error"


def output_tail(stdout: str | None, stderr: str | None, chars: int = 4000) -> str:
    """The last ``chars`` of each stream; a fatal-error dump on stderr is kept whole (up to 60 000 characters).

    The dump lists the threads newest first, so the crashing thread may be far from the end.
    """
    stdout, stderr = stdout or "", stderr or ""
    tail = stdout[-chars:] + stderr[-chars:]
    crash = stderr.find(FATAL_MARK)
    if crash >= 0 and crash < len(stderr) - chars:
        tail += "\n--- crash report ---\n" + stderr[crash:crash + 60_000]
    return tail
