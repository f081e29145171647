"""The simulator as the loop's ground-truth source (``ground_truth: {type: sim, world: workcell}``).

Only simulated systems name it; the loop then asks it where each entity truly is in the views it just
reasoned over (the world is still between motions: the planner observes only after a motion ended) and
which plan the instruction needs (:mod:`robopin.reasoning.ground_truth`). Regions are the bounding boxes
of each object's segmentation mask per view, in RoboPIN's 0-1000 coordinates; an object is named by the
words the oracle uses for it (``describe``) and a plate also as its free area, so a pin is right when it
lies on an object so named. The next goal comes from the instruction grounded in the scene, as the oracle
reads it; the reference plan is, for each goal not yet met in order, the first action of the dictionary that
carries out that goal (RoboGPT-R1's per-task action dictionary; :func:`robopin.sim.grounding.action_plan`: an
action naming look-alikes appears once for each of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.ndimage

from robopin.pincot import Box
from robopin.pincot.coords import pixel_index_to_normalized
from robopin.reasoning.errors import ReasoningConfigError
from robopin.reasoning.ground_truth import GROUND_TRUTH, GroundTruthRegions
from robopin.reasoning.protocols import Observation

__all__ = ["SimGroundTruth"]


def _body_boxes(segmentation: np.ndarray, view_index: int, min_pixels: int) -> dict[int, Box]:
    """Per body id seen on at least ``min_pixels`` pixels: the bounding box of its mask in 0-1000 coordinates.

    One pass over the image for every body (pixel counts by ``bincount``, boxes by ``find_objects``), not one
    comparison of the whole image per object.
    """
    height, width = segmentation.shape
    labels = segmentation.astype(np.int64) + 1  # background (-1) becomes 0, which find_objects skips
    counts = np.bincount(labels.ravel())
    boxes: dict[int, Box] = {}
    for label, window in enumerate(scipy.ndimage.find_objects(labels), start=1):
        if window is None or counts[label] < min_pixels:
            continue
        rows, cols = window
        x0, y0 = pixel_index_to_normalized(cols.start, rows.start, (width, height))
        x1, y1 = pixel_index_to_normalized(cols.stop - 1, rows.stop - 1, (width, height))
        # A model writes integer 0-1000 points: half a unit of margin keeps a rounded pin on its pixel inside.
        boxes[label - 1] = Box(
            max(x0 - 0.5, 0.0), max(y0 - 0.5, 0.0), min(x1 + 0.5, 1000.0), min(y1 + 0.5, 1000.0), view_index
        )
    return boxes


class SimGroundTruth:
    """Ground truth from the simulated world registered as ``world`` (see the module docstring)."""

    def __init__(self, world: str = "workcell", min_visible_pixels: int = 40) -> None:
        self.world = str(world)
        self.min_visible_pixels = int(min_visible_pixels)
        self._boxes: dict[tuple[str, int], tuple[np.ndarray, dict[int, Box]]] = {}  # view -> (segmentation, boxes)

    def __repr__(self) -> str:
        return f"SimGroundTruth(world={self.world!r})"

    def _scene(self):
        from robopin.sim.tasks import get_scene

        return get_scene(self.world)

    def regions(self, observation: Observation, instruction: str) -> GroundTruthRegions | None:
        from robopin.sim.oracle import GroundTruthOracle, describe

        scene = self._scene()
        views = observation.view_names
        oracle = GroundTruthOracle(scene, views, min_visible_pixels=self.min_visible_pixels, instruction=instruction)
        entities: dict[str, list[Box]] = {}
        by_object: dict[str, list[Box]] = {}
        for index, name in enumerate(views):
            segmentation = scene.world.segmentation(name)
            cached = self._boxes.get((name, index))
            if cached is not None and cached[0] is segmentation:
                seen = cached[1]  # a still scene: the same render, the same boxes
            else:
                seen = _body_boxes(segmentation, index, self.min_visible_pixels)
                self._boxes[(name, index)] = (segmentation, seen)
            for obj in scene.world.objects.values():
                box = seen.get(obj.body_id)
                if box is None:
                    continue
                by_object.setdefault(obj.name, []).append(box)
                words = describe(scene, obj.name)
                for key in (words, f"free area on the {words}", f"free area in the {words}"):
                    entities.setdefault(key, []).append(box)
        goal = None if oracle.grounding_error else oracle.next_goal()
        pick = tuple(by_object.get(goal[0], ())) if goal else ()
        place = tuple(by_object.get(goal[1], ())) if goal else ()
        return GroundTruthRegions({k: tuple(v) for k, v in entities.items()}, pick, place)

    def reference_plan(self, instruction: str, actions: Mapping[int, str]) -> tuple[str, ...] | None:
        from robopin.sim.grounding import GroundingError, action_plan, ground_instruction
        from robopin.sim.tasks import on_plate

        scene = self._scene()
        try:
            goals = ground_instruction(scene, instruction).goals
        except GroundingError:
            return None
        remaining = [goal for goal in goals if not on_plate(scene.world, goal[0], goal[1])[0]]
        ids, missing = action_plan(scene, actions, remaining)
        if missing:
            return None  # the dictionary cannot say this plan: no reference to score against
        return tuple(actions[key] for key in ids)


@GROUND_TRUTH.register("sim")
def make_sim_ground_truth(settings: Mapping[str, Any]) -> SimGroundTruth:
    unknown = sorted(set(settings) - {"world", "min_visible_pixels"})
    if unknown:
        raise ReasoningConfigError(f"unknown setting(s) {unknown} for ground_truth 'sim'; expected world, "
                                   "min_visible_pixels")
    return SimGroundTruth(**dict(settings))
