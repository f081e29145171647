"""Trial bags: record a trial to rosbag2 MCAP from raw CDR, read it back, replay it on schedule, diff a
re-planned replay.

- :mod:`robopin.bags.typestore`: Jazzy + robopin_interfaces (+ action parts) + Foxglove annotations for ``rosbags``.
- :mod:`robopin.bags.recorder`: :class:`BagWriter` (queue + writer thread), :class:`TrialRecorder` (one bag per task,
  static transforms first, anchors as Foxglove image annotations).
- :mod:`robopin.bags.reader`: :class:`TrialBag` (ours or ``ros2 bag record``'s).
- :mod:`robopin.bags.replay`: :func:`replay` with rate/loop/offset/filters and measured lateness; :func:`frames`.
- :mod:`robopin.bags.diff`: compare recorded and re-planned reasoning, targets and plans.
- :mod:`robopin.bags.task_replay`: recorded planner steps fed to a planner again (VLM backend, arm dry run).
"""

from robopin.bags.reader import BagMessage, BagNotFoundError, TrialBag
from robopin.bags.recorder import BagStats, BagWriter, RecorderError, StaticTransform, TrialRecorder
from robopin.bags.replay import ReplayError, ReplayOptions, ReplayStats, frames, replay
from robopin.bags.typestore import robopin_typestore

__all__ = [
    "BagMessage",
    "BagNotFoundError",
    "BagStats",
    "BagWriter",
    "RecorderError",
    "ReplayError",
    "ReplayOptions",
    "ReplayStats",
    "StaticTransform",
    "TrialBag",
    "TrialRecorder",
    "frames",
    "replay",
    "robopin_typestore",
]
