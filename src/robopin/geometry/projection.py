"""Pinned 2D points to 3D targets: pixel → robust depth → optical frame → base frame, with refusals.

:class:`Projector` owns the configured views (which ``img_idx`` is which camera and how it is
mounted) and the arm-pose buffer for wrist views; given the latest synced depth of each view it turns
each requested point into a :class:`Target` — a point, a surface normal and the depth evidence in
the base frame — or into a refused target carrying a :class:`RefusalReason`. Points sharing an anchor
ID across views are checked against each other: fused when they are one surface point, kept when
they lie on one object (:mod:`robopin.geometry.crossview`), flagged ``views_disagree`` otherwise. A
point a view cannot be trusted with (a hole, a depth edge) is replaced by another view's point of the
same ID when one is valid (:func:`fall_back_to_other_views`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from robopin.geometry.camera_model import CameraModel
from robopin.geometry.crossview import CrossViewConfig, CrossViewVerdict, ViewDepth, same_object
from robopin.geometry.depth import DepthConfig, robust_depth
from robopin.geometry.extrinsics import CameraMount, PoseBuffer, StalePoseError
from robopin.geometry.reasons import RefusalReason
from robopin.geometry.surface import estimate_normal
from robopin.geometry.transforms import transform_points, transform_vectors
from robopin.geometry.workspace import WorkspaceBox
from robopin.settings import setting

__all__ = [
    "FUSION_POLICIES",
    "PointRequest",
    "ProjectionConfig",
    "ProjectionError",
    "Projector",
    "Target",
    "ViewConfig",
    "ViewData",
    "fall_back_to_other_views",
    "fuse_targets",
]

logger = logging.getLogger(__name__)

FusionPolicy = Literal["refuse", "prefer_view", "nearest_view"]
FUSION_POLICIES: tuple[str, ...] = ("refuse", "prefer_view", "nearest_view")

_NAN3 = np.full(3, np.nan)

VIEW_SPECIFIC_REASONS = frozenset(
    {
        RefusalReason.NO_DEPTH,
        RefusalReason.OUT_OF_RANGE,
        RefusalReason.DEPTH_EDGE_AMBIGUOUS,
        RefusalReason.OUT_OF_IMAGE,
        RefusalReason.STALE_FRAME,
        RefusalReason.STALE_POSE,
        RefusalReason.UNKNOWN_VIEW,
        RefusalReason.NO_CALIBRATION,
    }
)
"""Refusals that say the *view* cannot be trusted with the point, not that the point is wrong: another
view's point of the same anchor ID may stand in. ``outside_workspace`` and ``views_disagree`` are about
the point itself and never fall back."""


def _nan3() -> NDArray[np.float64]:
    return np.full(3, np.nan)


class ProjectionError(ValueError):
    """A projection set-up that cannot work (duplicate views, bad tolerances, unknown policy)."""


@dataclass(frozen=True)
class ViewConfig:
    """One configured camera view: its name, its ``img_idx`` in the model prompt and its mount."""

    name: str
    img_idx: int
    mount: CameraMount | None  # None: not calibrated yet; its points are refused (no_calibration)

    def __post_init__(self) -> None:
        if not self.name:
            raise ProjectionError("a view needs a non-empty name")
        if not isinstance(self.img_idx, int) or self.img_idx < 0:
            raise ProjectionError(f"view {self.name!r}: img_idx must be a non-negative integer, got {self.img_idx!r}")


@dataclass(frozen=True)
class ViewData:
    """The depth of one view to project with: metric depth aligned to ``camera``, and its capture time."""

    depth_m: NDArray
    camera: CameraModel
    stamp_s: float

    def __post_init__(self) -> None:
        if self.depth_m.shape != (self.camera.height, self.camera.width):
            raise ProjectionError(
                f"depth image {self.depth_m.shape[1]}x{self.depth_m.shape[0]} does not match the camera "
                f"model {self.camera.width}x{self.camera.height}"
            )


@dataclass(frozen=True)
class PointRequest:
    """A point to project: pixel ``(u, v)`` in view ``img_idx`` (pixel centres at +0.5), and its anchor."""

    u: float
    v: float
    img_idx: int
    id: str = ""
    name: str = ""


@dataclass(frozen=True)
class Target:
    """A projected point. ``valid`` False means it must not be used for motion; ``reason`` says why.

    ``point`` / ``normal`` are in ``frame`` (NaN where they could not be computed); ``point_camera``
    is the same point in the source camera's optical frame. ``views`` lists the views whose
    estimates were fused into ``point`` or that confirmed it lies on the same object (just
    ``source_view`` when no other view saw it). ``fallback_from`` names the view whose own point of
    this anchor was refused (and why), when this target is another view's point standing in for it.
    """

    id: str
    name: str
    source_view: str
    img_idx: int
    u: float
    v: float
    point: NDArray[np.float64] = field(default_factory=_nan3)
    normal: NDArray[np.float64] = field(default_factory=_nan3)
    point_camera: NDArray[np.float64] = field(default_factory=_nan3)
    depth_m: float = math.nan
    depth_spread_m: float = math.nan
    depth_valid_fraction: float = 0.0
    stamp_s: float = math.nan
    frame: str = "base"
    valid: bool = False
    reason: RefusalReason | None = None
    detail: str = ""
    views: tuple[str, ...] = ()
    fallback_from: str = ""


@dataclass(frozen=True)
class ProjectionConfig:
    """Parameters of the projection.

    Attributes:
        depth: how depth is sampled at a point (window, range, edge handling).
        normal_window_px: window (pixels) of the plane fit for the surface normal.
        workspace: targets outside it are refused (``outside_workspace``); None disables the check.
        pose_tolerance_s: a wrist view needs an arm pose within this time of the frame.
        fusion_tolerance_m: estimates of one anchor ID from several views closer than this are one
            surface point and are averaged.
        cross_view: the rule for estimates further apart (``object_extent``: they agree when they lie
            on one object; ``distance``: they disagree).
        fusion_policy: what to do when they disagree — ``refuse`` all of them, keep the one from the
            first view in ``view_priority`` (``prefer_view``), or the one seen from closest
            (``nearest_view``, the smaller depth, usually the wrist camera); the others are refused.
        view_priority: view names, most trusted first (for ``prefer_view``).
        plane_agreement_m: the local plane fit refines the window median (sub-pixel position) only
            when the two depths agree within this (or within 3 robust standard deviations).
        max_frame_age_s: frames older than this at projection time are refused (``stale_frame``);
            0 disables the check (offline use, tests). Needs ``now_s`` in :meth:`Projector.project`.
    """

    depth: DepthConfig = field(default_factory=DepthConfig)
    normal_window_px: int = setting(9, "window of the surface normal plane fit, pixels", min=1)
    workspace: WorkspaceBox | None = None
    pose_tolerance_s: float = setting(0.05, "a wrist view needs an arm pose within this many seconds of the frame",
                                      min=0.0)
    fusion_tolerance_m: float = setting(0.02, "estimates of one anchor from several views must agree within this, "
                                              "metres", min=0.0)
    cross_view: CrossViewConfig = field(default_factory=CrossViewConfig)
    fusion_policy: str = setting("refuse", "when views disagree: refuse, prefer_view (see view_priority) or "
                                           "nearest_view")
    view_priority: tuple[str, ...] = ()
    plane_agreement_m: float = 0.005
    max_frame_age_s: float = setting(0.0, "frames older than this at projection time are refused as stale_frame, "
                                          "seconds (0: no check)", min=0.0)

    def __post_init__(self) -> None:
        if self.fusion_policy not in FUSION_POLICIES:
            raise ProjectionError(f"fusion_policy {self.fusion_policy!r} is unknown; expected one of {FUSION_POLICIES}")
        if not self.pose_tolerance_s >= 0:
            raise ProjectionError(f"pose_tolerance_s must be >= 0 seconds, got {self.pose_tolerance_s}")
        if not self.fusion_tolerance_m > 0:
            raise ProjectionError(f"fusion_tolerance_m must be positive metres, got {self.fusion_tolerance_m}")
        if not self.max_frame_age_s >= 0:
            raise ProjectionError(f"max_frame_age_s must be >= 0 seconds, got {self.max_frame_age_s}")
        if self.normal_window_px < 3 or self.normal_window_px % 2 == 0:
            raise ProjectionError(f"normal_window_px must be an odd integer >= 3, got {self.normal_window_px}")


class _FrameMemo:
    """Results worked out on the depth frames of the last few requests, reused while those frames are asked about.

    E-TTS projects every candidate of a batch in one request and the loop then projects the chosen one again on
    the same frames; the cross-view rule (a voxel grid, plane fits and a clustering per group of pins) is most
    of a request's time. A result depends only on the frame and the pins, so it is kept under the frame's depth
    array itself (held here, so it cannot be freed and its id given to another) and the pixels. Only the
    newest ``frames`` arrays are kept: a live camera's frames do not pile up.
    """

    def __init__(self, frames: int = 4, entries: int = 512) -> None:
        self.frames, self.entries = frames, entries
        self._lock = threading.Lock()
        self._by_frame: OrderedDict[int, tuple[NDArray, dict]] = OrderedDict()

    def get(self, depths: Sequence[NDArray], key: tuple) -> object | None:
        with self._lock:
            held = self._by_frame.get(id(depths[0]))
            if held is None or held[0] is not depths[0]:
                return None
            found = held[1].get(key)
        if found is None or any(a is not b for a, b in zip(found[0], depths, strict=True)):
            return None
        return found[1]

    def put(self, depths: Sequence[NDArray], key: tuple, value: object) -> None:
        with self._lock:
            held = self._by_frame.get(id(depths[0]))
            if held is None or held[0] is not depths[0]:
                held = self._by_frame[id(depths[0])] = (depths[0], {})
                while len(self._by_frame) > self.frames:
                    self._by_frame.popitem(last=False)
            self._by_frame.move_to_end(id(depths[0]))
            if len(held[1]) >= self.entries:
                held[1].clear()
            held[1][key] = (tuple(depths), value)


class Projector:
    """Projects pinned points of the configured views into the base frame."""

    def __init__(
        self,
        views: Sequence[ViewConfig],
        config: ProjectionConfig | None = None,
        pose_buffer: PoseBuffer | None = None,
    ) -> None:
        self.config = config or ProjectionConfig()
        self.pose_buffer = pose_buffer if pose_buffer is not None else PoseBuffer()
        self._memo = _FrameMemo()
        self._views: dict[int, ViewConfig] = {}
        for view in views:
            if view.img_idx in self._views:
                raise ProjectionError(
                    f"img_idx {view.img_idx} is configured twice ({self._views[view.img_idx].name!r} and {view.name!r})"
                )
            self._views[view.img_idx] = view
        names = [v.name for v in views]
        if len(set(names)) != len(names):
            raise ProjectionError(f"view names must be unique, got {names}")
        unknown = set(self.config.view_priority) - set(names)
        if unknown:
            raise ProjectionError(f"view_priority names unknown views {sorted(unknown)}; configured: {names}")

    @property
    def views(self) -> dict[int, ViewConfig]:
        return dict(self._views)

    def view(self, img_idx: int) -> ViewConfig | None:
        return self._views.get(img_idx)

    def project_point(
        self, request: PointRequest, frames: Mapping[int, ViewData], now_s: float | None = None,
        absent: Mapping[int, str] | None = None,
    ) -> Target:
        """Project one point (no multi-view fusion); ``now_s`` enables the frame-age check; ``absent`` says why a
        view has no frame in ``frames`` (its targets' refusal detail)."""
        cfg = self.config
        view = self._views.get(request.img_idx)
        base = Target(request.id, request.name, view.name if view else "", request.img_idx, request.u, request.v)
        if view is None:
            return replace(
                base,
                reason=RefusalReason.UNKNOWN_VIEW,
                detail=f"img_idx {request.img_idx} is not configured; views: {self._describe_views()}",
            )
        data = frames.get(request.img_idx)
        if data is None:
            why = (absent or {}).get(request.img_idx, "none received")
            return replace(base, reason=RefusalReason.UNKNOWN_VIEW,
                           detail=f"no depth frame from view {view.name!r}: {why}")
        base = replace(base, stamp_s=data.stamp_s, views=(view.name,))
        if cfg.max_frame_age_s > 0 and now_s is not None and now_s - data.stamp_s > cfg.max_frame_age_s:
            return replace(
                base,
                reason=RefusalReason.STALE_FRAME,
                detail=f"newest frame of {view.name!r} is {now_s - data.stamp_s:.3f} s old; "
                f"limit {cfg.max_frame_age_s:.3f} s",
            )
        camera = data.camera
        if not camera.contains(request.u, request.v):
            return replace(
                base,
                reason=RefusalReason.OUT_OF_IMAGE,
                detail=f"({request.u:.1f}, {request.v:.1f}) is outside {camera.width}x{camera.height}",
            )
        sample = robust_depth(data.depth_m, request.u, request.v, cfg.depth)
        base = replace(base, depth_spread_m=sample.spread_m, depth_valid_fraction=sample.valid_fraction)
        if not sample.valid:
            return replace(
                base,
                reason=sample.reason,
                detail=f"{sample.n_valid} valid depth samples, {sample.n_surfaces} surfaces",
            )
        ray = camera.pixel_to_ray(request.u, request.v)
        surface = estimate_normal(
            data.depth_m,
            camera,
            request.u,
            request.v,
            sample.depth_m,
            window_px=cfg.normal_window_px,
            config=cfg.depth,
        )
        # The window median is the depth at the centre of the pixel holding the point, not at the
        # point: on a surface sloping away in the image that is up to half a pixel's slope off
        # (~1.5 mm at 1 m on an oblique table). Where the local plane fit agrees with the median,
        # take the depth where the point's own ray meets that plane.
        depth = sample.depth_m
        plane_depth = surface.depth_along_ray(ray)
        if math.isfinite(plane_depth) and abs(plane_depth - depth) <= max(3.0 * sample.spread_m, cfg.plane_agreement_m):
            depth = plane_depth
        p_cam = ray * depth
        normal_cam = surface.normal
        base = replace(base, depth_m=depth, point_camera=p_cam)
        if view.mount is None:
            return replace(base, reason=RefusalReason.NO_CALIBRATION, detail=f"view {view.name!r} has no extrinsics")
        try:
            T_base_cam = self._T_base_cam(view, data)
        except StalePoseError as exc:
            return replace(base, reason=RefusalReason.STALE_POSE, detail=str(exc))
        point = transform_points(T_base_cam, p_cam)
        normal = transform_vectors(T_base_cam, normal_cam)
        target = replace(base, point=point, normal=normal)
        if cfg.workspace is not None and not cfg.workspace.contains(point):
            return replace(
                target,
                reason=RefusalReason.OUTSIDE_WORKSPACE,
                detail=f"{np.round(point, 3).tolist()} is outside {cfg.workspace}",
            )
        return replace(target, valid=True)

    def _T_base_cam(self, view: ViewConfig, data: ViewData) -> NDArray[np.float64]:
        """The view's camera pose in the base frame at the frame's time (raises ``StalePoseError``)."""
        assert view.mount is not None
        T_base_ee = None
        if view.mount.kind == "wrist":
            T_base_ee = self.pose_buffer.lookup(data.stamp_s, self.config.pose_tolerance_s)
        return view.mount.T_base_cam(T_base_ee, validate=False)

    def project(
        self, requests: Sequence[PointRequest], frames: Mapping[int, ViewData], now_s: float | None = None,
        absent: Mapping[int, str] | None = None,
    ) -> list[Target]:
        """Project every point, check points sharing an anchor ID across views, and let a view that
        cannot be trusted with its point fall back to another view's point of that ID (same order).
        ``absent``: why a view has no frame (see :meth:`project_point`)."""
        targets = [self._project_point_once(r, frames, now_s, absent) for r in requests]
        agree = None
        if self.config.cross_view.rule == "object_extent":
            agree = lambda members: self._same_object(members, frames)  # noqa: E731
        return fall_back_to_other_views(fuse_targets(targets, self.config, agree))

    def _project_point_once(self, request: PointRequest, frames: Mapping[int, ViewData], now_s: float | None,
                            absent: Mapping[int, str] | None = None) -> Target:
        """``project_point``, taken from the memo when this pixel of this very frame was projected before.

        Not with ``now_s`` (the frame-age check depends on when it is asked), and a stale pose is not kept (the
        pose may arrive)."""
        data = frames.get(request.img_idx)
        if now_s is not None or data is None:
            return self.project_point(request, frames, now_s, absent)
        key = ("point", request.img_idx, request.u, request.v)
        found = self._memo.get((data.depth_m,), key)
        if isinstance(found, Target):
            return replace(found, id=request.id, name=request.name)
        target = self.project_point(request, frames, now_s)
        if target.reason != RefusalReason.STALE_POSE:
            self._memo.put((data.depth_m,), key, replace(target, id="", name=""))
        return target

    def _same_object(self, members: Sequence[Target], frames: Mapping[int, ViewData]) -> CrossViewVerdict:
        """The object-extent verdict on valid targets of one ID from different views (memoised per frames).

        Memoised by the set of pins, not their order: E-TTS asks about a trace's pick with the other view's pin
        and about its other-view candidate, the same two pins the other way round. Whether pins share one object
        does not depend on their order; the labels (and the detail naming them) are put back in the order asked."""
        pins = [(t.img_idx, t.u, t.v, *np.asarray(t.point, np.float64).tolist()) for t in members]
        order = sorted(range(len(members)), key=lambda i: pins[i])
        arrays = tuple(frames[members[i].img_idx].depth_m for i in order)
        key = ("same_object", *(pins[i] for i in order))
        found = self._memo.get(arrays, key)
        if isinstance(found, tuple):
            verdict, labels = found
            if not labels:
                return verdict
            asked = tuple(labels[pin] for pin in pins)
            detail = verdict.detail.replace(str(list(verdict.labels)), str(list(asked)))
            return replace(verdict, detail=detail, labels=asked)
        depths = []
        for target in members:
            view, data = self._views[target.img_idx], frames[target.img_idx]
            depths.append(ViewDepth(data.depth_m, data.camera, self._T_base_cam(view, data)))
        verdict = same_object([t.point for t in members], [(t.u, t.v) for t in members], depths,
                              self.config.cross_view)
        labels = dict(zip(pins, verdict.labels, strict=True)) if len(verdict.labels) == len(pins) else {}
        self._memo.put(arrays, key, (verdict, labels))
        return verdict

    def _describe_views(self) -> str:
        return ", ".join(f"{i}={v.name}" for i, v in sorted(self._views.items())) or "none"


def fuse_targets(
    targets: Sequence[Target],
    config: ProjectionConfig,
    agree: Callable[[Sequence[Target]], CrossViewVerdict] | None = None,
) -> list[Target]:
    """Check valid targets sharing a non-empty ID from different views; apply the policy on disagreement.

    Every pair within ``fusion_tolerance_m``: one surface point; each gets the weighted mean (weights
    1 / (spread² + (1 mm)²)) and the mean normal, and lists every view used. Further apart, ``agree``
    (the object-extent rule) may still find them on one object: each keeps its own point (two
    surfaces of one object averaged would be a point inside it) and lists the views that saw it.
    Otherwise they disagree.
    """
    out = list(targets)
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(targets):
        if t.id and t.valid:
            groups.setdefault(t.id, []).append(i)
    for anchor_id, members in groups.items():
        if len({targets[i].source_view for i in members}) < 2:
            continue
        pts = np.array([targets[i].point for i in members])
        dists = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=-1)
        worst = float(dists.max())
        if worst <= config.fusion_tolerance_m:
            spreads = np.array([targets[i].depth_spread_m for i in members])
            weights = 1.0 / (np.nan_to_num(spreads, nan=0.01) ** 2 + 1e-6)
            fused = (weights[:, None] * pts).sum(axis=0) / weights.sum()
            normals = np.array([targets[i].normal for i in members])
            finite = np.all(np.isfinite(normals), axis=1)
            normal = _NAN3.copy()
            if finite.any():
                s = normals[finite].sum(axis=0)
                if np.linalg.norm(s) > 1e-9:
                    normal = s / np.linalg.norm(s)
            views = tuple(dict.fromkeys(targets[i].source_view for i in members))
            for i in members:
                out[i] = replace(targets[i], point=fused.copy(), normal=normal.copy(), views=views)
            continue
        seen_in = [targets[i].source_view for i in members]
        verdict = agree([targets[i] for i in members]) if agree is not None else None
        if verdict is not None and verdict.same:
            views = tuple(dict.fromkeys(seen_in))
            for i in members:
                out[i] = replace(targets[i], views=views, detail=f"views {list(views)} agree: {verdict.detail}")
            continue
        detail = f"anchor {anchor_id!r}: views {seen_in} disagree by {worst:.3f} m"
        if verdict is not None:
            detail += f" and not on one object ({verdict.detail})"
        keep: int | None = None
        if config.fusion_policy == "prefer_view":
            rank = {name: k for k, name in enumerate(config.view_priority)}
            keep = min(members, key=lambda i: (rank.get(targets[i].source_view, len(rank)), targets[i].img_idx))
        elif config.fusion_policy == "nearest_view":
            keep = min(members, key=lambda i: targets[i].depth_m)
        logger.warning("%s; policy %s", detail, config.fusion_policy)
        for i in members:
            if i != keep:
                out[i] = replace(targets[i], valid=False, reason=RefusalReason.VIEWS_DISAGREE, detail=detail)
    return out


def fall_back_to_other_views(targets: Sequence[Target]) -> list[Target]:
    """Replace each target refused for a view-specific reason by a valid target of the same anchor ID
    from another view (the first such in order), saying so in ``fallback_from`` and ``detail``.

    A target with no other valid view of its ID keeps its own refusal: only when no view gives a
    trustworthy 3D point is the anchor refused.
    """
    out = list(targets)
    for i, target in enumerate(targets):
        if target.valid or not target.id or target.reason not in VIEW_SPECIFIC_REASONS:
            continue
        stand_in = next((t for t in targets if t.valid and t.id == target.id and t.img_idx != target.img_idx), None)
        if stand_in is None:
            continue
        refused = target.source_view or f"img_idx {target.img_idx}"
        out[i] = replace(
            stand_in,
            name=target.name or stand_in.name,
            fallback_from=f"{refused}: {target.reason}",
            detail=f"{refused} pin of {target.id!r} refused ({target.reason}"
            + (f": {target.detail}" if target.detail else "")
            + f"); using view {stand_in.source_view!r}'s pin of the same ID",
        )
        logger.info("anchor %r: %s", target.id, out[i].detail)
    return out
