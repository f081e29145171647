"""The single-goal policy every robopin action server follows: one goal runs, a second is refused with a reason.

A second instruction while one runs is never interleaved (ARCHITECTURE.md, safety rules). ROS action
goal responses cannot carry a reason, so servers accept the goal and abort it at once with the named
reason ``busy`` and the ID of the goal that holds the server; the client sees why in the result.
"""

from __future__ import annotations

import threading

BUSY_REASON = "busy"


class SingleGoalGuard:
    """A lock-protected slot for the one goal allowed to run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: str | None = None

    @property
    def active(self) -> str | None:
        """ID of the goal holding the slot, or None."""
        with self._lock:
            return self._active

    def try_acquire(self, goal_id: str) -> str | None:
        """Take the slot for goal_id; return None on success or the ID of the goal already holding it."""
        with self._lock:
            if self._active is not None and self._active != goal_id:
                return self._active
            self._active = goal_id
            return None

    def release(self, goal_id: str) -> None:
        """Free the slot if goal_id holds it (releasing someone else's slot is a no-op)."""
        with self._lock:
            if self._active == goal_id:
                self._active = None

    def busy_message(self, holder: str) -> str:
        """Human-readable refusal naming the goal that holds the server."""
        return f"another goal is running ({holder}); wait for it to finish or cancel it first"
