"""Hand-eye solvers: a wrist camera's ``T_ee_cam`` (eye-in-hand) and a static camera's ``T_base_cam``.

Eye-in-hand: the board lies still in the base frame, the camera rides on the hand;
``T_base_ee_i · T_ee_cam · T_cam_board_i`` is the same board pose for every sample i.
Eye-to-hand: the board is held by the hand, the camera is fixed;
``inv(T_base_ee_i) · T_base_cam · T_cam_board_i`` is the same ``T_ee_board`` for every sample.

Every OpenCV method is available: ``calibrateHandEye`` (``tsai``, ``park``, ``horaud``, ``andreff``,
``daniilidis``) and ``calibrateRobotWorldHandEye`` (``shah``, ``li``, which also solve the board
pose). ``method="auto"`` runs them all and keeps the one with the lowest held-out error; given the
views' corners, a joint reprojection refinement (mount and board pose, all views at once) follows, as
closed-form solvers weigh every view's noisy PnP rotation equally. Residuals
are the disagreement between each sample's measured board pose and the one the solution predicts,
in rotation (deg) and translation (mm), both on the samples used and on held-out samples
(leave-one-out: each sample predicted by a solution that did not see it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from robopin.calibration.errors import DegenerateSamplesError
from robopin.geometry.transforms import as_transform, invert, make_transform, rotation_angle

__all__ = [
    "HAND_EYE_METHODS",
    "Corners",
    "HandEyeResult",
    "MountKind",
    "Residuals",
    "SolverConfig",
    "check_motion_diversity",
    "mean_transform",
    "predicted_cam_board",
    "refine_reprojection",
    "residuals",
    "solve_hand_eye",
]

MountKind = Literal["eye_in_hand", "eye_to_hand"]

HAND_EYE_METHODS: tuple[str, ...] = ("tsai", "park", "horaud", "andreff", "daniilidis", "shah", "li")
_ROBOT_WORLD = ("shah", "li")


@dataclass(frozen=True)
class SolverConfig:
    """``min_samples`` poses are required; the arm's rotations between samples must reach
    ``min_rotation_deg`` and their axes must differ by ``min_axis_spread_deg`` (hand-eye is unobservable
    from rotations about one axis). ``method`` is one of :data:`HAND_EYE_METHODS` or ``auto``.
    ``refine`` polishes the best closed-form solution by minimising the corners' reprojection error
    over all views (when the views' corners are given), kept only if its held-out error is lower."""

    method: str = "auto"
    min_samples: int = 5
    min_rotation_deg: float = 10.0
    min_axis_spread_deg: float = 20.0
    heldout: bool = True
    refine: bool = True

    def __post_init__(self) -> None:
        if self.method != "auto" and self.method not in HAND_EYE_METHODS:
            raise ValueError(
                f"hand-eye method {self.method!r} is unknown; expected 'auto' or one of {HAND_EYE_METHODS}"
            )
        if self.min_samples < 3:
            raise ValueError(
                f"min_samples must be >= 3 (the problem needs two independent motions), got {self.min_samples}"
            )
        for name in ("min_rotation_deg", "min_axis_spread_deg"):
            if not 0.0 <= getattr(self, name) < 90.0:
                raise ValueError(f"{name} must be in [0, 90) degrees, got {getattr(self, name)}")


@dataclass(frozen=True)
class Residuals:
    """Board-pose disagreement per sample: RMS and max rotation (deg) and translation (mm)."""

    rotation_rms_deg: float
    rotation_max_deg: float
    translation_rms_mm: float
    translation_max_mm: float

    def to_dict(self) -> dict[str, float]:
        """Rounded mapping for YAML and logs."""
        return {k: round(float(v), 4) for k, v in self.__dict__.items()}

    def score(self) -> float:
        """One number to rank solutions: mm plus 10 mm per degree (0.1 deg at 0.5 m is ~0.9 mm)."""
        return self.translation_rms_mm + 10.0 * self.rotation_rms_deg


@dataclass
class HandEyeResult:
    """A solved mount: ``T_mount_cam`` (``T_ee_cam`` or ``T_base_cam``) and the board pose it implies
    (``T_anchor_board``: ``T_base_board`` eye-in-hand, ``T_ee_board`` eye-to-hand).

    ``fit`` / ``heldout`` compare board poses (each view's own PnP pose against the predicted one);
    with corners, ``reprojection_px`` / ``heldout_reprojection_px`` compare pixels, which is what
    ranks the solutions then: a single view's PnP rotation is far noisier than its corners."""

    kind: MountKind
    method: str
    T_mount_cam: NDArray[np.float64]
    T_anchor_board: NDArray[np.float64]
    sample_count: int
    fit: Residuals
    heldout: Residuals | None = None
    per_method: dict[str, dict[str, Any]] = field(default_factory=dict)
    reprojection_px: float | None = None  # RMS over every corner of every view (when corners were given)
    heldout_reprojection_px: float | None = None  # the same for each view predicted without it

    @property
    def mount_frame(self) -> str:
        """``ee`` for a wrist camera, ``base`` for a static one."""
        return "ee" if self.kind == "eye_in_hand" else "base"


def _check_kind(kind: str) -> None:
    if kind not in ("eye_in_hand", "eye_to_hand"):
        raise ValueError(f"kind must be 'eye_in_hand' (wrist camera) or 'eye_to_hand' (static camera), got {kind!r}")


def _as_stack(poses: Sequence[NDArray[np.float64]], name: str) -> NDArray[np.float64]:
    if not len(poses):
        return np.zeros((0, 4, 4))
    return np.stack([as_transform(T, f"{name}[{i}]") for i, T in enumerate(poses)])


def mean_transform(poses: NDArray[np.float64]) -> NDArray[np.float64]:
    """Chordal mean of rigid transforms: mean translation, the rotation nearest the mean matrix."""
    poses = np.asarray(poses, dtype=np.float64)
    U, _, Vt = np.linalg.svd(poses[:, :3, :3].sum(axis=0))
    R = U @ Vt
    if np.linalg.det(R) < 0:
        U[:, -1] *= -1
        R = U @ Vt
    return make_transform(R, poses[:, :3, 3].mean(axis=0))


def check_motion_diversity(T_base_ee: Sequence[NDArray[np.float64]], config: SolverConfig | None = None) -> None:
    """Raise :class:`DegenerateSamplesError` when the arm poses cannot determine a hand-eye transform."""
    config = config or SolverConfig()
    poses = _as_stack(T_base_ee, "T_base_ee")
    n = len(poses)
    if n < config.min_samples:
        raise DegenerateSamplesError(f"{n} usable sample(s); hand-eye calibration needs at least {config.min_samples}")
    axes, angles = [], []
    for i in range(n):
        for j in range(i + 1, n):
            R = poses[i, :3, :3].T @ poses[j, :3, :3]
            angle = rotation_angle(R)
            angles.append(angle)
            if angle >= math.radians(config.min_rotation_deg):
                axis = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
                norm = np.linalg.norm(axis)
                if norm > 1e-9:
                    axes.append(axis / norm)
    largest = math.degrees(max(angles)) if angles else 0.0
    if not axes:
        raise DegenerateSamplesError(
            f"the arm rotates at most {largest:.1f} deg between samples; need motions of at least "
            f"{config.min_rotation_deg} deg (vary the hand's orientation, not only its position)"
        )
    A = np.asarray(axes)
    # Axes are sign-free directions: the spread is the largest angle between two of them (mod 180).
    cosines = np.clip(np.abs(A @ A.T), 0.0, 1.0)
    spread = math.degrees(math.acos(cosines.min()))
    if spread < config.min_axis_spread_deg:
        raise DegenerateSamplesError(
            f"the arm's rotations are all about nearly parallel axes (spread {spread:.1f} deg, need "
            f"{config.min_axis_spread_deg} deg): tilt the hand about at least two different axes"
        )


def _split(poses: NDArray[np.float64]) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]]]:
    return [T[:3, :3].copy() for T in poses], [T[:3, 3].reshape(3, 1).copy() for T in poses]


def _solve_once(
    kind: MountKind, method: str, ee: NDArray[np.float64], cam: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(T_mount_cam, T_anchor_board) from one method on stacks of T_base_ee and T_cam_board."""
    import cv2

    if method in _ROBOT_WORLD:
        # OpenCV solves A_i X = Z B_i with A = world->cam (T_cam_board), B = base->gripper.
        # Eye-in-hand: T_cam_board = T_cam_ee T_ee_base T_base_board  -> B = T_ee_base, X = T_board_base, Z = T_cam_ee.
        # Eye-to-hand: T_cam_board = T_cam_base T_base_ee T_ee_board  -> B = T_base_ee, X = T_board_ee, Z = T_cam_base.
        B = np.stack([invert(T) for T in ee]) if kind == "eye_in_hand" else ee
        R_a, t_a = _split(cam)
        R_b, t_b = _split(B)
        flag = cv2.CALIB_ROBOT_WORLD_HAND_EYE_SHAH if method == "shah" else cv2.CALIB_ROBOT_WORLD_HAND_EYE_LI
        R_x, t_x, R_z, t_z = cv2.calibrateRobotWorldHandEye(R_a, t_a, R_b, t_b, method=flag)
        X = make_transform(_orthonormal(R_x), np.asarray(t_x).reshape(3))
        Z = make_transform(_orthonormal(R_z), np.asarray(t_z).reshape(3))
        return invert(Z), invert(X)
    flags = {
        "tsai": cv2.CALIB_HAND_EYE_TSAI,
        "park": cv2.CALIB_HAND_EYE_PARK,
        "horaud": cv2.CALIB_HAND_EYE_HORAUD,
        "andreff": cv2.CALIB_HAND_EYE_ANDREFF,
        "daniilidis": cv2.CALIB_HAND_EYE_DANIILIDIS,
    }
    # OpenCV's AX = XB takes gripper->base; for a static camera pass base->gripper and the answer is
    # cam->base (its documented eye-to-hand use).
    gripper = ee if kind == "eye_in_hand" else np.stack([invert(T) for T in ee])
    R_g, t_g = _split(gripper)
    R_c, t_c = _split(cam)
    R, t = cv2.calibrateHandEye(R_g, t_g, R_c, t_c, method=flags[method])
    T_mount_cam = make_transform(_orthonormal(R), np.asarray(t).reshape(3))
    return T_mount_cam, mean_transform(_board_poses(kind, T_mount_cam, ee, cam))


def _orthonormal(R: Any) -> NDArray[np.float64]:
    """Nearest rotation (some OpenCV methods return matrices a few 1e-6 off orthonormal)."""
    U, _, Vt = np.linalg.svd(np.asarray(R, dtype=np.float64).reshape(3, 3))
    R = U @ Vt
    if np.linalg.det(R) < 0:
        U[:, -1] *= -1
        R = U @ Vt
    return R


def _board_poses(
    kind: MountKind, T_mount_cam: NDArray[np.float64], ee: NDArray[np.float64], cam: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Each sample's board pose in the anchor frame implied by ``T_mount_cam``."""
    if kind == "eye_in_hand":
        return np.einsum("nij,jk,nkl->nil", ee, T_mount_cam, cam)
    return np.einsum("nij,jk,nkl->nil", np.linalg.inv(ee), T_mount_cam, cam)


def predicted_cam_board(kind: MountKind, T_mount_cam, T_anchor_board, T_base_ee) -> NDArray[np.float64]:
    """``T_cam_board`` a solution predicts for an arm pose."""
    if kind == "eye_in_hand":
        return invert(T_mount_cam) @ invert(T_base_ee) @ T_anchor_board
    return invert(T_mount_cam) @ T_base_ee @ T_anchor_board


def residuals(
    kind: MountKind,
    T_mount_cam: NDArray[np.float64],
    T_anchor_board: NDArray[np.float64],
    T_base_ee: Sequence[NDArray[np.float64]],
    T_cam_board: Sequence[NDArray[np.float64]],
) -> Residuals:
    """Disagreement between measured and predicted board poses (in the camera frame) over samples."""
    _check_kind(kind)
    rotations, translations = [], []
    for A, B in zip(T_base_ee, T_cam_board, strict=True):
        predicted = predicted_cam_board(kind, T_mount_cam, T_anchor_board, A)
        rotations.append(math.degrees(rotation_angle(predicted, B)))
        translations.append(1000.0 * float(np.linalg.norm(predicted[:3, 3] - B[:3, 3])))
    r, t = np.asarray(rotations), np.asarray(translations)
    return Residuals(float(np.sqrt(np.mean(r**2))), float(r.max()), float(np.sqrt(np.mean(t**2))), float(t.max()))


@dataclass(frozen=True)
class Corners:
    """One view's board corners: ``object_points`` (N, 3) in the board frame and where an ideal
    pinhole camera ``K`` sees them, ``image_points`` (N, 2) pixels (OpenCV convention)."""

    object_points: NDArray[np.float64]
    image_points: NDArray[np.float64]
    K: NDArray[np.float64]


def _small_transform(v: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rigid transform from a 6-vector (rotation vector, translation)."""
    theta = float(np.linalg.norm(v[:3]))
    if theta < 1e-12:
        R = np.eye(3)
    else:
        k = v[:3] / theta
        K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
        R = np.eye(3) + math.sin(theta) * K + (1.0 - math.cos(theta)) * K @ K
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = v[3:]
    return T


def _motions(kind: MountKind, ee: NDArray[np.float64]) -> NDArray[np.float64]:
    """The arm pose as it enters ``T_cam_board = inv(X) · M · Y``: ``T_ee_base`` or ``T_base_ee``."""
    return np.linalg.inv(ee) if kind == "eye_in_hand" else ee


def _reprojection_errors(
    X: NDArray[np.float64], Y: NDArray[np.float64], motions: NDArray[np.float64], corners: Sequence[Corners]
) -> NDArray[np.float64]:
    """(N, 2) pixel errors of every corner of every view under mount ``X`` and board pose ``Y``."""
    X_inv = invert(X)
    out = []
    for M, c in zip(motions, corners, strict=True):
        T = X_inv @ M @ Y
        p = c.object_points @ T[:3, :3].T + T[:3, 3]
        z = np.maximum(p[:, 2], 1e-6)
        u = c.K[0, 0] * p[:, 0] / z + c.K[0, 2]
        v = c.K[1, 1] * p[:, 1] / z + c.K[1, 2]
        out.append(np.column_stack([u, v]) - c.image_points)
    return np.concatenate(out)


def _rms_px(errors: NDArray[np.float64]) -> float:
    return float(np.sqrt(np.mean(np.sum(errors**2, axis=1))))


def refine_reprojection(
    kind: MountKind,
    T_mount_cam: NDArray[np.float64],
    T_anchor_board: NDArray[np.float64],
    T_base_ee: NDArray[np.float64],
    corners: Sequence[Corners],
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Jointly adjust mount and board pose to minimise every view's corner reprojection error.

    Returns (T_mount_cam, T_anchor_board, RMS reprojection error in pixels).
    """
    from scipy.optimize import least_squares

    motions = _motions(kind, np.asarray(T_base_ee, dtype=np.float64))

    def transforms(params: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return T_mount_cam @ _small_transform(params[:6]), T_anchor_board @ _small_transform(params[6:])

    def residual(params: NDArray[np.float64]) -> NDArray[np.float64]:
        return _reprojection_errors(*transforms(params), motions, corners).ravel()

    solution = least_squares(residual, np.zeros(12), method="lm", x_scale="jac")
    X, Y = transforms(solution.x)
    return X, Y, _rms_px(solution.fun.reshape(-1, 2))


Solver = Callable[[NDArray[np.float64], NDArray[np.float64], list[Corners] | None], tuple[NDArray, NDArray]]


def _evaluate(
    kind: MountKind,
    method: str,
    solver: Solver,
    ee: NDArray[np.float64],
    cam: NDArray[np.float64],
    *,
    corners: list[Corners] | None,
    heldout: bool,
) -> HandEyeResult:
    """Solve with ``solver`` on all samples, then score it on them and (leave-one-out) on held-out ones."""
    X, Y = solver(ee, cam, corners)
    fit = residuals(kind, X, Y, ee, cam)
    reprojection = _rms_px(_reprojection_errors(X, Y, _motions(kind, ee), corners)) if corners else None
    held = held_px = None
    if heldout:
        rotations, translations, pixel_errors = [], [], []
        for i in range(len(ee)):
            keep = [j for j in range(len(ee)) if j != i]
            X_i, Y_i = solver(ee[keep], cam[keep], [corners[j] for j in keep] if corners else None)
            one = residuals(kind, X_i, Y_i, ee[i : i + 1], cam[i : i + 1])
            rotations.append(one.rotation_max_deg)
            translations.append(one.translation_max_mm)
            if corners:
                pixel_errors.append(_reprojection_errors(X_i, Y_i, _motions(kind, ee[i : i + 1]), [corners[i]]))
        r, t = np.asarray(rotations), np.asarray(translations)
        held = Residuals(float(np.sqrt(np.mean(r**2))), float(r.max()), float(np.sqrt(np.mean(t**2))), float(t.max()))
        held_px = _rms_px(np.concatenate(pixel_errors)) if corners else None
    return HandEyeResult(
        kind, method, X, Y, len(ee), fit, held, reprojection_px=reprojection, heldout_reprojection_px=held_px
    )


def _score(result: HandEyeResult) -> float:
    """Lower is better: held-out pixels when corners were given, else held-out (or fit) pose error."""
    if result.heldout_reprojection_px is not None:
        return result.heldout_reprojection_px
    if result.reprojection_px is not None and result.heldout is None:
        return result.reprojection_px
    return (result.heldout or result.fit).score()


def _summary(result: HandEyeResult) -> dict[str, Any]:
    out: dict[str, Any] = {"fit": result.fit.to_dict()}
    if result.heldout is not None:
        out["heldout"] = result.heldout.to_dict()
    if result.reprojection_px is not None:
        out["reprojection_px"] = round(result.reprojection_px, 4)
    if result.heldout_reprojection_px is not None:
        out["heldout_reprojection_px"] = round(result.heldout_reprojection_px, 4)
    return out


def solve_hand_eye(
    kind: MountKind,
    T_base_ee: Sequence[NDArray[np.float64]],
    T_cam_board: Sequence[NDArray[np.float64]],
    config: SolverConfig | None = None,
    corners: Sequence[Corners] | None = None,
) -> HandEyeResult:
    """Solve a camera mount from paired arm poses and board poses (see the module docstring).

    ``corners`` (one :class:`Corners` per sample) enable the reprojection refinement and pixel-based
    ranking. Raises :class:`DegenerateSamplesError` for too few samples or rotations that cannot
    determine the transform; a method that fails numerically is reported in ``per_method`` and skipped.
    """
    _check_kind(kind)
    config = config or SolverConfig()
    if len(T_base_ee) != len(T_cam_board):
        raise ValueError(f"{len(T_base_ee)} arm poses but {len(T_cam_board)} board poses; they must pair up")
    if corners is not None and len(corners) != len(T_base_ee):
        raise ValueError(f"{len(corners)} corner sets for {len(T_base_ee)} samples; they must pair up")
    ee = _as_stack(T_base_ee, "T_base_ee")
    cam = _as_stack(T_cam_board, "T_cam_board")
    corner_list = list(corners) if corners is not None else None
    check_motion_diversity(list(ee), config)
    methods = HAND_EYE_METHODS if config.method == "auto" else (config.method,)
    # Held-out scores need one solve per left-out sample and a sample to spare.
    use_heldout = config.heldout and len(ee) >= max(4, config.min_samples)
    best: HandEyeResult | None = None
    per_method: dict[str, dict[str, Any]] = {}
    for method in methods:

        def closed_form(e, c, _corners, method=method):
            return _solve_once(kind, method, e, c)

        try:
            candidate = _evaluate(kind, method, closed_form, ee, cam, corners=corner_list, heldout=use_heldout)
        except Exception as error:  # cv2.error, LinAlgError, ValueError: a method that fails is skipped
            per_method[method] = {"error": f"{type(error).__name__}: {error}"}
            continue
        per_method[method] = _summary(candidate)
        if best is None or _score(candidate) < _score(best):
            best = candidate
    if best is None:
        raise DegenerateSamplesError(f"every hand-eye method failed: {per_method}")
    if config.refine and corner_list is not None:
        start = best

        def refined(e, c, corners_subset):
            X, Y, _ = refine_reprojection(kind, start.T_mount_cam, start.T_anchor_board, e, corners_subset)
            return X, Y

        name = f"{start.method}+refine"
        try:
            candidate = _evaluate(kind, name, refined, ee, cam, corners=corner_list, heldout=use_heldout)
        except (ValueError, np.linalg.LinAlgError) as error:
            per_method[name] = {"error": f"{type(error).__name__}: {error}"}
        else:
            per_method[name] = _summary(candidate)
            if _score(candidate) <= _score(best):
                best = candidate
    best.per_method = per_method
    return best
