"""The named reasons a 2D point is refused as a 3D target (carried in ``Target3D.reason`` and logs)."""

from __future__ import annotations

from enum import Enum

__all__ = ["RefusalReason"]


class RefusalReason(str, Enum):
    """Why a target must not be used for motion. The value is the wire string."""

    NO_DEPTH = "no_depth"  # no (or too few) valid depth samples around the point
    OUT_OF_IMAGE = "out_of_image"  # the point lies outside the view's image
    OUT_OF_RANGE = "out_of_range"  # depth exists but lies outside the camera's trusted range
    DEPTH_EDGE_AMBIGUOUS = "depth_edge_ambiguous"  # the point straddles a depth edge; surface unclear
    STALE_FRAME = "stale_frame"  # the newest frame of the view is older than the allowed age
    STALE_POSE = "stale_pose"  # no arm pose within tolerance of the frame's timestamp (wrist view)
    VIEWS_DISAGREE = "views_disagree"  # several views saw the same anchor ID at different places
    UNKNOWN_VIEW = "unknown_view"  # img_idx / view name not configured, or no frame for it yet
    OUTSIDE_WORKSPACE = "outside_workspace"  # the 3D point lies outside the configured workspace box
    NO_CALIBRATION = "no_calibration"  # the view has no extrinsics to reach the target frame

    def __str__(self) -> str:
        return self.value
