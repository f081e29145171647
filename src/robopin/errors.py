"""What counts as one of robopin's named errors, for the entry points that report them.

Every layer raises its own exception classes with messages written for the user (a missing bag, a
planner backend that cannot run here, a malformed calibration file). The command line and the node
processes print those in one line with the class name; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "is_named_error", "nearest_name", "one_line"]


def is_named_error(error: BaseException) -> bool:
    """Whether ``error``'s class is defined in robopin or robopin_ros (not a library's or Python's own)."""
    module = type(error).__module__ or ""
    return module in ("robopin", "robopin_ros") or module.startswith(("robopin.", "robopin_ros."))


def one_line(error: BaseException) -> str:
    """``ClassName: message`` (the class name alone when there is no message)."""
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def nearest_name(name: object, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``name`` (difflib), or None when none is close enough to be a typo of it."""
    matches = difflib.get_close_matches(str(name), sorted({str(c) for c in candidates}), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: object, candidates: Iterable[str]) -> str:
    """``"; did you mean 'workspace'?"`` for a misspelled ``name``, or ``""`` when no candidate is close."""
    best = nearest_name(name, candidates)
    return f"; did you mean {best!r}?" if best is not None else ""
