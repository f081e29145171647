"""Node loggers that write a line in microseconds: rclpy's output (console, /rosout, log file), no caller search.

rclpy 7.1 (Jazzy) ``RcutilsLogger.log`` builds a ``CallerId`` on every call: ``_find_caller`` walks up the
stack calling ``inspect.getframeinfo`` on each frame, which resolves the source file with
``os.path.realpath`` / ``os.stat`` (and reads its lines through ``linecache``): about fifty ``stat`` and
``lstat`` system calls a line. Each one gives up the interpreter lock and waits to take it back, so in a
process where other threads run (every node of ``robopin up`` shares one) a line cost 10 ms median and up
to 90 ms, measured on the stage lines a task logs between its feedback messages. rclpy keeps the caller
only to key its throttle/once/skip-first filters and to fill the log record's function, file and line.

:class:`NodeLogger` writes through the same C function rclpy's logger ends in
(``rclpy_logging_rcutils_log``: the rcutils output handlers, so the console format, ``/rosout`` and the
log file are unchanged), with the caller taken from the calling frame itself as Python's ``logging`` does.
A call with filter arguments (``throttle_duration_sec``, ``once``, ``skip_first``) goes to rclpy's logger,
which keeps per-call-site state for them. RAI Institute's synchros2 (``MemoizingRcutilsLogger``) bypasses
the same search for the same reason.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from typing import Any

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.logging import LoggingSeverity
from rclpy.node import Node

__all__ = ["LoggedNode", "NodeLogger", "explain_dropped_replies"]

# rclpy's Service.send_response warns with this text when rmw_send_response returns RMW_RET_TIMEOUT:
# rmw_fastrtps (rmw_response.cpp) waits a short time for the client's reply reader to be matched by the
# server's reply writer and drops the reply if it is not. It happens to a client that called right after it
# was discovered (bring-up, a CLI process). The callers that must have an answer ask again (the recorder's
# parameter fetch, readiness polls), so the warning says nothing an operator can act on.
_DROPPED_REPLY = "failed to send response"
_dropped_lock = threading.Lock()
_dropped_installed = False


def explain_dropped_replies() -> None:
    """Replace rclpy's "failed to send response (timeout)" RuntimeWarning by one line per process saying
    what it means (installed once; every other warning is shown as before)."""
    global _dropped_installed
    with _dropped_lock:
        if _dropped_installed:
            return
        _dropped_installed = True
    previous = warnings.showwarning
    reported = threading.Event()

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: PLR0917 (warnings.showwarning)
        if issubclass(category, RuntimeWarning) and str(message).startswith(_DROPPED_REPLY):
            if not reported.is_set():
                reported.set()
                logging.getLogger("robopin_ros").info(
                    "a service reply was dropped: its client's reply reader was not matched yet (rmw_fastrtps "
                    "drops a reply it cannot deliver at once; robopin's callers ask again). Reported once per "
                    "process.")
            return
        previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    # Python's default filter shows a warning once per call site; every dropped reply must reach show().
    warnings.filterwarnings("always", message=_DROPPED_REPLY, category=RuntimeWarning)


class NodeLogger:
    """An rclpy logger's verbs (debug … fatal, log, get_child, set_level, …) without the per-line caller search."""

    def __init__(self, logger: RcutilsLogger) -> None:
        self._logger = logger
        self.name = logger.name

    def __getattr__(self, name: str) -> Any:  # set_level, get_effective_level, is_enabled_for, …
        return getattr(self._logger, name)

    def get_child(self, name: str) -> NodeLogger:
        return NodeLogger(self._logger.get_child(name))

    def _write(self, message: str, severity: LoggingSeverity, filters: dict[str, Any]) -> bool:
        if filters:
            # rclpy's filters keep state per call site: its own search finds ours (this file is not
            # among its internal callers, so it reports this line; the message is the same).
            return self._logger.log(message, severity, **filters)
        if not _rclpy.rclpy_logging_logger_is_enabled_for(self.name, severity):
            return False
        caller = sys._getframe(2)  # the frame that called debug/info/… (they call this directly)
        code = caller.f_code
        _rclpy.rclpy_logging_rcutils_log(severity, self.name, str(message), code.co_name, code.co_filename,
                                         caller.f_lineno)
        return True

    def log(self, message: str, severity: int, **filters: Any) -> bool:
        return self._write(message, LoggingSeverity(severity), filters)

    def debug(self, message: str, **filters: Any) -> bool:
        return self._write(message, LoggingSeverity.DEBUG, filters)

    def info(self, message: str, **filters: Any) -> bool:
        return self._write(message, LoggingSeverity.INFO, filters)

    def warning(self, message: str, **filters: Any) -> bool:
        return self._write(message, LoggingSeverity.WARN, filters)

    warn = warning

    def error(self, message: str, **filters: Any) -> bool:
        return self._write(message, LoggingSeverity.ERROR, filters)

    def fatal(self, message: str, **filters: Any) -> bool:
        return self._write(message, LoggingSeverity.FATAL, filters)


class LoggedNode(Node):
    """An rclpy ``Node`` whose ``get_logger()`` is a :class:`NodeLogger` (every robopin node derives from it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        explain_dropped_replies()
        super().__init__(*args, **kwargs)

    def get_logger(self) -> NodeLogger:  # type: ignore[override]
        logger = self.__dict__.get("_robopin_logger")
        if logger is None:
            logger = self.__dict__["_robopin_logger"] = NodeLogger(super().get_logger())
        return logger
