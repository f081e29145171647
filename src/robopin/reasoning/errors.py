"""The named reasons a task ends without success, and the exceptions that carry them.

Every refusal of the reasoning loop is a :class:`TaskRefusal` whose ``reason`` is one of
:data:`REFUSAL_REASONS` (or a projection / motion status passed through unchanged, e.g. ``no_depth``
from the projection, ``ik_fail`` from the motion planner). The reason string is what
``ExecuteTask.Result.reason`` carries and what logs and trial reports count.
"""

from __future__ import annotations

from collections.abc import Sequence

from robopin.registry import UnknownTypeError

REFUSAL_REASONS: dict[str, str] = {
    "invalid_instruction": "the instruction is empty, too long or not text",
    "invalid_mode": "the requested mode is not auto, point, subtask or plan (or is not configured)",
    "no_observation": "no multi-view snapshot could be taken (see the message for the camera's reason)",
    "stale_frame": "a view has no frame or its frames are older than the allowed age",
    "views_out_of_sync": "the views are fresh but not taken at the same time",
    "stale_arm_pose": "no arm pose near a frame's timestamp",
    "camera_qos_mismatch": "a camera publishes with a QoS the subscriber cannot match (best effort vs reliable): "
                           "no frame of that view can arrive",
    "vlm_timeout": "the model did not answer within its timeout",
    "vlm_unavailable": "the model server cannot be reached or the model does not exist",
    "vlm_error": "the model request failed (bad request, server error, unusable response)",
    "invalid_reasoning": "the reasoning does not parse or validate (format, tags, unknown IDs, points)",
    "id_conflict": "one anchor ID is bound to two names, two kinds or two far-apart points in one view",
    "invalid_answer": "the answer does not give a pick point and a place point in a known view",
    "model_declined": "the model answered no target (an empty answer list): it found nothing the instruction names",
    "invalid_subtask": "the R^3 instruction line is missing or not in the skill library's formats",
    "invalid_plan": "the RoboGPT-R1 plan does not parse or uses actions outside the action dictionary",
    "unknown_skill": "the instruction matched a skill this robot cannot execute",
    "projection_unavailable": "the projection service did not answer or had no frames at all",
    "outside_workspace": "a target lies outside the configured workspace box",
    "motion_failed": "the motion planner or the arm failed without a more precise status",
    "max_steps_reached": "the model did not report the task done within max_steps",
    "tts_rejected": "test-time scaling rejected every sampled batch and is configured to refuse",
    "canceled": "the task was canceled (the arm was told to stop first)",
    "shutdown": "the stack was shut down while the task ran (the arm was stopped first)",
    "busy": "another task is running (single-goal policy)",
    "internal_error": "an unexpected error inside the planner (a bug: see the log)",
}
"""Reasons the loop itself names. Projection refusals (``no_depth``, ``out_of_image``, ``out_of_range``,
``depth_edge_ambiguous``, ``stale_pose``, ``views_disagree``, ``unknown_view``, ``no_calibration``, …)
and motion statuses (``ik_fail``, ``no_path``, …) are passed through as they come."""

ID_CONFLICT_CODES = frozenset({"id_name_conflict", "id_kind_conflict", "id_point_conflict"})
"""PinCoT error codes that mean the model gave one identity to two entities (reason ``id_conflict``)."""


class ReasoningConfigError(ValueError):
    """A reasoning-loop configuration value is unusable (the message names it and what was expected)."""


class UnknownReasonerError(ReasoningConfigError, UnknownTypeError):
    """No reasoner is registered under the configured ``reasoner: {type: ...}``."""


class TaskRefusal(Exception):  # noqa: N818 - a refusal is an outcome with a reason, not a crash
    """The task cannot go on: ``reason`` is a stable name, ``message`` says what was wrong.

    ``details`` are extra machine-readable strings (e.g. the PinCoT error codes behind
    ``invalid_reasoning``).
    """

    def __init__(self, reason: str, message: str, details: Sequence[str] = ()) -> None:
        if not reason or not isinstance(reason, str):
            raise ValueError(f"a refusal needs a non-empty reason name, got {reason!r}")
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.details = tuple(details)


class TaskCanceled(TaskRefusal):
    """The task was canceled by its client (reason ``canceled``)."""

    def __init__(self, message: str = "canceled by the client") -> None:
        super().__init__("canceled", message)
