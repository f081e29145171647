"""What a client saw of one task on a running stack: its answer, feedback, result and the views it reasoned on.

Filled by the ROS task client (``robopin_ros.task_client``); read by ``robopin instruct`` and trial judging.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from robopin.system.timing import FeedbackEvent, StepTiming, step_timings

__all__ = ["BringupError", "TaskRun"]


class BringupError(RuntimeError):
    """The system could not be brought up (a node failed to start or never became ready)."""


@dataclasses.dataclass
class TaskRun:
    """What a client saw of one task: whether it started, every feedback, the result, the views."""

    instruction: str
    accepted: bool = False
    task_id: str = ""  # the first 8 hex digits of the goal id: what logs, bags and `robopin cancel` name
    message: str = ""
    goal_id: bytes = b""  # the task's full ExecuteTask goal UUID
    events: list[FeedbackEvent] = dataclasses.field(default_factory=list)
    start_s: float = 0.0
    end_s: float = 0.0
    result: Any = None  # robopin_interfaces/action/ExecuteTask result, None when none came
    timed_out: bool = False
    interrupted: bool = False  # the client stopped the task (Ctrl-C or SIGTERM on `robopin instruct`)
    stack_lost: str = ""  # the stack stopped answering while the task ran: why (its heartbeat stopped)
    views: dict[int, dict[str, np.ndarray]] = dataclasses.field(default_factory=dict)
    # step -> the 3D targets projection drew for it (its last ProjectPoints call), see marker_array_to_targets
    targets: dict[int, list[dict]] = dataclasses.field(default_factory=dict)

    @property
    def success(self) -> bool:
        return bool(self.result is not None and self.result.success)

    @property
    def reason(self) -> str:
        """Why the task failed, by name (empty on success)."""
        if not self.accepted:
            return "instruct_rejected"
        if self.timed_out:
            return "task_timeout"
        if self.stack_lost and self.result is None:
            return "stack_lost"
        if self.interrupted and self.result is None:
            return "canceled"
        if self.result is None:
            return "no_result"
        return "" if self.result.success else (self.result.reason or "task_failed")

    def timings(self) -> list[StepTiming]:
        """Per-step stage durations from the feedback, with each step's model time."""
        model: dict[int, float] = {}
        for message in (self.result.reasoning_steps if self.result is not None else []):
            model[int(message.step)] = model.get(int(message.step), 0.0) + float(message.generation_time_s)
        return step_timings(self.events, self.start_s, self.end_s or time.monotonic(), model)
