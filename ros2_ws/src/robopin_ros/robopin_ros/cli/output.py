"""Output streams of the ``robopin`` commands that must outlive their reader (``| tee`` ended by Ctrl-C)."""

from __future__ import annotations

import contextlib
import os

__all__ = ["PipeSafeOutput"]


class PipeSafeOutput:
    """A text stream that never raises: a closed pipe (``| head -c1``, Ctrl-C ending ``| tee``) calls ``on_closed``.

    A command that must finish what it started however its reader went (``instruct`` cancels its task, ``trial``
    keeps its results and exits with its own code) may not have a print raise there. On the first failed write,
    the stream's file descriptor is pointed at /dev/null (Python's own advice for SIGPIPE, so its final flush at
    exit is quiet) and ``on_closed`` runs.
    """

    def __init__(self, stream, on_closed) -> None:
        self._stream, self._on_closed = stream, on_closed
        self.closed_pipe = False

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError):
                self._closed()
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._closed()

    def _closed(self) -> None:
        self.closed_pipe = True
        self._on_closed()
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
