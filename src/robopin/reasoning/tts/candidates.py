"""Action candidates of one PinCoT trace: N executable pick/place variants derived from its pins.

E-TTS samples N actions per reasoning trace. Our policy's action is a pick point and a place point,
so the variants come from what the trace pinned and what depth shows around it, in this order:

- ``as_written``: the answer's pick and place points;
- ``other_view``: the same anchor IDs as pinned in another view (multi-view PinCoT);
- ``segment_centre``: the centre of the pinned object's depth segment (the object's pixels rising
  above the support plane around the point) for the pick, and likewise for the place region;
- ``segment_samples``: random points well inside the pick object's segment.

Depth segments need the observation's depth (``Observation.source`` with per-view ``depth_m`` and
``intrinsics``, e.g. a ``MultiViewSnapshot``); without depth only the first two sources apply.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robopin.geometry import CameraModel, PointRequest
from robopin.pincot.coords import normalized_to_pixels
from robopin.pincot.trace import Trace
from robopin.reasoning.protocols import Observation
from robopin.reasoning.tts.config import ActionSamplingConfig


@dataclass(frozen=True)
class ActionCandidate:
    """One ⟨reasoning, action⟩ pair's action: pick and place requests (None for non-pointing answers).

    ``trace_index`` is the trace within the step; ``source`` names how the action was derived
    (``as_written``, ``other_view``, ``segment_centre``, ``segment_sample``); ``answer_img_idx`` is
    the view the trace's own answer picks in.
    """

    trace_index: int
    action_index: int
    pick: PointRequest | None
    place: PointRequest | None
    source: str = "as_written"
    support: tuple[PointRequest, ...] = ()
    answer_img_idx: int | None = None

    def describe(self) -> str:
        if self.pick is None or self.place is None:
            return f"trace {self.trace_index}: {self.source} (no points)"
        return (
            f"trace {self.trace_index} {self.source}: pick {self.pick.id or '?'} view {self.pick.img_idx} "
            f"({self.pick.u:.1f}, {self.pick.v:.1f}), place {self.place.id or '?'} view {self.place.img_idx} "
            f"({self.place.u:.1f}, {self.place.v:.1f})"
        )


@dataclass(frozen=True)
class DepthView:
    """Depth of one view registered to its color image, and the color image's pinhole model."""

    depth_m: NDArray[np.floating]
    camera: CameraModel


def depth_views(observation: Observation) -> dict[int, DepthView]:
    """Per ``img_idx``, the depth the observation carries (empty when its source has none)."""
    source: Any = observation.source
    frames = getattr(source, "frames", None)
    names = getattr(source, "views", None)
    if not isinstance(frames, Mapping) or names is None:
        return {}
    found = {}
    for index, name in enumerate(names):
        frame = frames.get(name)
        # Segments are cut in the colour image the pins are on: depth registered to it (an unaligned
        # camera_node's depth is registered here, once per observation).
        aligned = getattr(frame, "aligned_depth_m", None)
        depth = aligned() if callable(aligned) else getattr(frame, "depth_m", None)
        camera = getattr(frame, "intrinsics", None)
        if depth is not None and isinstance(camera, CameraModel):
            found[index] = DepthView(np.asarray(depth), camera)
    return found


@dataclass(frozen=True)
class DepthSegment:
    """The pixels of the object under a point: connected, above the support plane fitted around it.

    ``centre_u``/``centre_v`` is the segment pixel nearest the segment's centroid (a concave
    segment's centroid can fall off the object); ``radius_px`` the radius of a disc of the same area;
    ``interior`` marks the pixels at least the sampling margin inside the border; ``area_m2`` is
    the visible surface area (each pixel's footprint at its depth), which compares across views:
    a view that sees the object partly hidden sees less of it.
    """

    centre_u: float
    centre_v: float
    radius_px: float
    height_m: float
    pixels_u: NDArray[np.float64]
    pixels_v: NDArray[np.float64]
    interior: NDArray[np.bool_]
    area_m2: float = 0.0

    def distance_px(self, u: float, v: float) -> float:
        return math.hypot(u - self.centre_u, v - self.centre_v)

    def contains(self, u: float, v: float) -> bool:
        """Whether pixel ``(u, v)`` is one of the segment's pixels."""
        col, row = math.floor(u) + 0.5, math.floor(v) + 0.5
        return bool(np.any((self.pixels_u == col) & (self.pixels_v == row)))


def _fit_support_plane(points: NDArray[np.float64], rng: np.random.Generator, tolerance_m: float, iterations: int = 64):
    """RANSAC plane (unit normal toward the camera, offset) through the most points; None if degenerate."""
    if len(points) < 30:
        return None
    sample = points[rng.integers(len(points), size=min(len(points), 1500))]
    triples = sample[rng.integers(len(sample), size=(iterations, 3))]
    normals = np.cross(triples[:, 1] - triples[:, 0], triples[:, 2] - triples[:, 0])
    lengths = np.linalg.norm(normals, axis=1)
    ok = lengths > 1e-9
    if not np.any(ok):
        return None
    normals = normals[ok] / lengths[ok, None]
    offsets = -np.einsum("ij,ij->i", normals, triples[ok, 0])
    inliers = np.abs(sample @ normals.T + offsets) < tolerance_m
    best = int(np.argmax(inliers.sum(axis=0)))
    members = sample[inliers[:, best]]
    centroid = members.mean(axis=0)
    _, _, vt = np.linalg.svd(members - centroid, full_matrices=False)
    normal = vt[2]
    if np.dot(normal, centroid) > 0:  # point toward the camera (origin): heights above the support > 0
        normal = -normal
    return normal, -float(np.dot(normal, centroid))


def _segment_in_window(
    view: DepthView,
    col: int,
    row: int,
    half: int,
    *,
    min_height_m: float,
    edge_gap: tuple[float, float],
    seed: int,
) -> tuple[NDArray[np.bool_], tuple[int, int], NDArray[np.float64]] | None:
    """The object mask around pixel (col, row) in a window of ``half`` pixels each side, its window
    origin (row, column) and the heights above the support; None when there is no object there."""
    from scipy import ndimage

    depth, camera = view.depth_m, view.camera
    height, width = depth.shape
    r0, r1, c0, c1 = max(row - half, 0), min(row + half + 1, height), max(col - half, 0), min(col + half + 1, width)
    patch = np.asarray(depth[r0:r1, c0:c1], dtype=np.float64)
    valid = np.isfinite(patch) & (patch > 0)
    rows, cols = np.mgrid[r0:r1, c0:c1]
    points = np.full((*patch.shape, 3), np.nan)
    points[valid] = camera.deproject(cols[valid] + 0.5, rows[valid] + 0.5, patch[valid])
    plane = _fit_support_plane(points[valid], np.random.default_rng(seed), tolerance_m=min_height_m / 2)
    if plane is None:
        return None
    normal, offset = plane
    heights = np.zeros(patch.shape)
    heights[valid] = points[valid] @ normal + offset
    above = valid & (heights > min_height_m)
    # Objects that overlap in the image touch in the mask; a depth step between neighbours separates them.
    filled = np.where(valid, patch, 1e6)
    gap = np.maximum(edge_gap[0], edge_gap[1] * np.where(valid, patch, 0.0))
    step = np.zeros(patch.shape, dtype=bool)
    vertical = np.abs(np.diff(filled, axis=0)) > gap[1:, :]
    horizontal = np.abs(np.diff(filled, axis=1)) > gap[:, 1:]
    step[1:, :] |= vertical
    step[:-1, :] |= vertical
    step[:, 1:] |= horizontal
    step[:, :-1] |= horizontal
    above &= ~step
    labels, _ = ndimage.label(above, structure=np.ones((3, 3), dtype=bool))
    lr, lc = row - r0, col - c0
    label = int(labels[lr, lc])
    if label == 0:
        near = labels[max(lr - 2, 0) : lr + 3, max(lc - 2, 0) : lc + 3]
        found = near[near > 0]
        if found.size == 0:
            return None
        label = int(np.bincount(found).argmax())
    return labels == label, (r0, c0), heights


def depth_segment(
    view: DepthView,
    u: float,
    v: float,
    *,
    radius_m: float = 0.08,
    min_height_m: float = 0.01,
    margin_px: int = 2,
    edge_gap_m: float = 0.015,
    edge_gap_relative: float = 0.02,
    max_half_px: int = 100,
    seed: int = 0,
) -> DepthSegment | None:
    """The depth segment of the object at ``(u, v)``, or None (no depth there, or the point is on the support).

    The window around the point spans about ``radius_m`` on the surface (at most ``max_half_px``
    pixels each side, which bounds the cost close to a camera); the support is the
    RANSAC plane with the most points in it (the table, or a plate's top); the segment is the
    connected set of pixels more than ``min_height_m`` above that plane that contains the point
    (or a pixel within two pixels of it). Neighbours whose depths differ by more than
    ``max(edge_gap_m, edge_gap_relative * depth)`` are cut apart (an object in front of another).
    """
    from scipy import ndimage

    depth, camera = view.depth_m, view.camera
    height, width = depth.shape
    if not (math.isfinite(u) and math.isfinite(v) and 0 <= u < width and 0 <= v < height):
        return None
    col, row = math.floor(u), math.floor(v)
    centre = np.asarray(depth[max(row - 2, 0) : row + 3, max(col - 2, 0) : col + 3], dtype=np.float64)
    centre = centre[np.isfinite(centre) & (centre > 0)]
    if centre.size == 0:
        return None
    half = min(max_half_px, max(4, math.ceil(camera.fx * radius_m / float(np.median(centre)))))
    while True:
        found = _segment_in_window(
            view, col, row, half, min_height_m=min_height_m, edge_gap=(edge_gap_m, edge_gap_relative), seed=seed
        )
        if found is None:
            return None
        mask, (r0, c0), full_height = found
        # A segment cut by the window (a large object, or a point near its edge): widen, up to the cap.
        cut = mask[0, :].any() or mask[-1, :].any() or mask[:, 0].any() or mask[:, -1].any()
        if not cut or half >= max_half_px:
            break
        half = min(max_half_px, 2 * half)
    seg_rows, seg_cols = np.nonzero(mask)
    seg_depth = np.asarray(view.depth_m, dtype=np.float64)[seg_rows + r0, seg_cols + c0]
    area_m2 = float(np.sum(seg_depth**2)) / (view.camera.fx * view.camera.fy)
    k = int(np.argmin((seg_rows - seg_rows.mean()) ** 2 + (seg_cols - seg_cols.mean()) ** 2))
    interior = ndimage.binary_erosion(mask, iterations=margin_px) if margin_px else mask
    return DepthSegment(
        centre_u=float(seg_cols[k] + c0 + 0.5),
        centre_v=float(seg_rows[k] + r0 + 0.5),
        radius_px=math.sqrt(len(seg_rows) / math.pi),
        height_m=float(np.max(full_height[mask])),
        pixels_u=(seg_cols + c0 + 0.5).astype(np.float64),
        pixels_v=(seg_rows + r0 + 0.5).astype(np.float64),
        interior=interior[seg_rows, seg_cols],
        area_m2=area_m2,
    )


class SegmentCache:
    """Depth segments of one observation, memoised: a point inside a known segment reuses it
    (traces and their variants pin the same objects at nearby pixels)."""

    def __init__(self, observation: Observation, config: ActionSamplingConfig) -> None:
        self.observation = observation
        self.views = depth_views(observation)
        self.config = config
        self._by_pixel: dict[tuple[int, int, int], DepthSegment | None] = {}
        self._segments: dict[int, list[DepthSegment]] = {}

    def __call__(self, img_idx: int, u: float, v: float) -> DepthSegment | None:
        view = self.views.get(img_idx)
        if view is None:
            return None
        key = (img_idx, math.floor(u), math.floor(v))
        if key in self._by_pixel:
            return self._by_pixel[key]
        segment = next((s for s in self._segments.get(img_idx, ()) if s.contains(u, v)), None)
        if segment is None:
            segment = depth_segment(
                view,
                u,
                v,
                radius_m=self.config.segment_radius_m,
                min_height_m=self.config.min_height_m,
                margin_px=self.config.sample_margin_px,
            )
            if segment is not None:
                self._segments.setdefault(img_idx, []).append(segment)
        self._by_pixel[key] = segment
        return segment


def _anchor_requests(trace: Trace, anchor_id: str, sizes: Sequence[tuple[int, int]]) -> list[PointRequest]:
    """Every pin of ``anchor_id`` in the trace's reasoning, one per view, as pixel requests."""
    requests: list[PointRequest] = []
    seen: set[int] = set()
    if not anchor_id:
        return requests
    for anchor in trace.anchors_for(anchor_id):
        if anchor.in_answer or anchor.img_idx in seen or not 0 <= anchor.img_idx < len(sizes):
            continue
        seen.add(anchor.img_idx)
        u, v = normalized_to_pixels(anchor.x, anchor.y, sizes[anchor.img_idx])
        requests.append(PointRequest(float(u), float(v), anchor.img_idx, anchor.id, anchor.name))
    return requests


def _support(
    trace: Trace, chosen: Sequence[PointRequest], sizes: Sequence[tuple[int, int]]
) -> tuple[PointRequest, ...]:
    """Pins of the chosen points' IDs in the other views (for the projection's cross-view check)."""
    support = []
    for request in chosen:
        if request.id:
            support += [r for r in _anchor_requests(trace, request.id, sizes) if r.img_idx != request.img_idx]
    return tuple(support)


def _key(pick: PointRequest, place: PointRequest) -> tuple:
    return (pick.img_idx, round(pick.u), round(pick.v), place.img_idx, round(place.u), round(place.v))


def action_candidates(
    trace_index: int,
    decision: Any,
    observation: Observation,
    *,
    count: int,
    config: ActionSamplingConfig,
    segments: SegmentCache | None,
    rng: np.random.Generator,
) -> list[ActionCandidate]:
    """Up to ``count`` distinct actions for one validated pointing decision (see the module docstring).

    A decision without pick and place points (``done``, a subtask or a plan) has one action: itself.
    """
    pick, place = getattr(decision, "pick", None), getattr(decision, "place", None)
    trace: Trace | None = getattr(decision, "trace", None)
    if pick is None or place is None or trace is None:
        return [ActionCandidate(trace_index, 0, None, None, "as_written")]
    sizes = observation.image_sizes
    chosen: list[tuple[PointRequest, PointRequest, str]] = []
    seen: set[tuple] = set()

    def add(pick_request: PointRequest, place_request: PointRequest, source: str) -> None:
        key = _key(pick_request, place_request)
        if len(chosen) < count and key not in seen:
            seen.add(key)
            chosen.append((pick_request, place_request, source))

    sources = config.sources
    if "as_written" in sources:
        add(pick, place, "as_written")
    picks, places = [pick], [place]
    if "other_view" in sources:
        other_picks = [r for r in _anchor_requests(trace, pick.id, sizes) if r.img_idx != pick.img_idx]
        other_places = [r for r in _anchor_requests(trace, place.id, sizes) if r.img_idx != place.img_idx]
        for alternative in other_picks:
            add(alternative, place, "other_view")
        for alternative in other_places:
            add(pick, alternative, "other_view")
        for a in other_picks:
            for b in other_places:
                add(a, b, "other_view")
        picks += other_picks
        places += other_places
    if segments is not None and "segment_centre" in sources:
        pick_centres = []
        for request in picks:
            segment = segments(request.img_idx, request.u, request.v)
            if segment is not None:
                pick_centres.append(replace(request, u=segment.centre_u, v=segment.centre_v))
        place_centres = []
        for request in places:
            segment = segments(request.img_idx, request.u, request.v)
            if segment is not None:
                place_centres.append(replace(request, u=segment.centre_u, v=segment.centre_v))
        for centre in pick_centres:
            add(centre, place, "segment_centre")
        for centre in place_centres:
            add(pick_centres[0] if pick_centres else pick, centre, "segment_centre")
    if segments is not None and "segment_samples" in sources and len(chosen) < count:
        segment = segments(pick.img_idx, pick.u, pick.v)
        if segment is not None:
            pool = np.flatnonzero(segment.interior)
            if pool.size == 0:
                pool = np.arange(len(segment.pixels_u))
            order = rng.permutation(pool)
            for k in order[: 4 * count]:
                add(replace(pick, u=float(segment.pixels_u[k]), v=float(segment.pixels_v[k])), place, "segment_sample")
                if len(chosen) >= count:
                    break
    return [
        ActionCandidate(trace_index, index, a, b, source, _support(trace, (a, b), sizes), pick.img_idx)
        for index, (a, b, source) in enumerate(chosen)
    ]
