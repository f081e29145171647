"""Foxglove image annotations from a recorded PinnedReasoning: one ImageAnnotations message per view.

Each anchor becomes a circle (objects filled, free regions hollow) with its ID as text, answer
points a larger ring; colours follow :func:`robopin.pincot.draw.id_colors` so the report and
Foxglove agree. Foxglove's pixel coordinates put (0, 0) at the top-left corner of the first
pixel, the same convention as our ``u``, ``v`` (pixel centres at +0.5), so points pass unchanged.
"""

from __future__ import annotations

import math
from typing import Any

from robopin.interfaces import pinned_annotations
from robopin.pincot.draw import ANSWER_COLOR, id_colors
from robopin.system.names import absolute_name

__all__ = ["annotation_topic", "reasoning_to_annotations"]

ANCHOR_DIAMETER_PX = 10.0
ANSWER_DIAMETER_PX = 22.0


def annotation_topic(view: str) -> str:
    """The annotation topic of a view, next to its color image (pick it in Foxglove's image panel)."""
    return absolute_name(pinned_annotations(view))


def _view_name(reasoning: Any, img_idx: int) -> str:
    names = list(reasoning.view_names)
    return names[img_idx] if 0 <= img_idx < len(names) else f"view{img_idx}"


def reasoning_to_annotations(reasoning: Any, typestore: Any) -> dict[str, Any]:
    """Return ``{view name: foxglove_msgs/msg/ImageAnnotations}`` for a decoded PinnedReasoning.

    ``reasoning`` is any object with the message's fields (rosbags or rclpy class); the result uses
    ``typestore``'s classes. Points without pixels (NaN ``u``/``v``) are left out.
    """
    types = typestore.types
    color_type, point_type = types["foxglove_msgs/msg/Color"], types["foxglove_msgs/msg/Point2"]
    stamp = reasoning.header.stamp
    time = types["builtin_interfaces/msg/Time"](sec=stamp.sec, nanosec=stamp.nanosec)
    palette = id_colors([a.id for a in reasoning.anchors])

    def color(rgb: tuple[int, int, int], alpha: float = 1.0) -> Any:
        return color_type(r=rgb[0] / 255.0, g=rgb[1] / 255.0, b=rgb[2] / 255.0, a=alpha)

    clear = color((0, 0, 0), 0.0)
    circles: dict[str, list[Any]] = {}
    texts: dict[str, list[Any]] = {}
    for anchor in reasoning.anchors:
        if not (math.isfinite(anchor.u) and math.isfinite(anchor.v)):
            continue
        view = _view_name(reasoning, anchor.img_idx)
        rgb = palette.get(anchor.id, ANSWER_COLOR)
        circles.setdefault(view, []).append(types["foxglove_msgs/msg/CircleAnnotation"](
            timestamp=time, position=point_type(x=float(anchor.u), y=float(anchor.v)), diameter=ANCHOR_DIAMETER_PX,
            thickness=2.0, fill_color=color(rgb, 0.8 if anchor.kind == "obj" else 0.0), outline_color=color(rgb)))
        texts.setdefault(view, []).append(types["foxglove_msgs/msg/TextAnnotation"](
            timestamp=time, position=point_type(x=float(anchor.u) + ANCHOR_DIAMETER_PX, y=float(anchor.v)),
            text=f"{anchor.id} {anchor.name}".strip(), font_size=12.0, text_color=color(rgb),
            background_color=color((0, 0, 0), 0.6)))
    for number, point in enumerate(reasoning.answer_points, start=1):
        if point.img_idx < 0 or not (math.isfinite(point.u) and math.isfinite(point.v)):
            continue
        view = _view_name(reasoning, point.img_idx)
        rgb = palette.get(point.id, ANSWER_COLOR)
        circles.setdefault(view, []).append(types["foxglove_msgs/msg/CircleAnnotation"](
            timestamp=time, position=point_type(x=float(point.u), y=float(point.v)), diameter=ANSWER_DIAMETER_PX,
            thickness=3.0, fill_color=clear, outline_color=color(rgb)))
        texts.setdefault(view, []).append(types["foxglove_msgs/msg/TextAnnotation"](
            timestamp=time, position=point_type(x=float(point.u) + ANSWER_DIAMETER_PX, y=float(point.v) + 14.0),
            text=point.label or f"answer {number}", font_size=12.0, text_color=color(rgb),
            background_color=color((0, 0, 0), 0.6)))
    views = sorted(set(circles) | set(texts))
    return {
        view: types["foxglove_msgs/msg/ImageAnnotations"](circles=circles.get(view, []), points=[],
                                                          texts=texts.get(view, []))
        for view in views
    }
