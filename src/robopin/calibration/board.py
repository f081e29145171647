"""Calibration boards (ChArUco and ArUco grids): their OpenCV objects, printable images and detection.

A detected view yields the board pose ``T_cam_board`` (board frame: origin at the first chessboard
corner or the first marker's top-left corner, x along the rows, y down the printed image, z into
the board) from the camera's intrinsics and distortion, or a named :class:`Rejection` when the view
should not be used: board not found, corners that the configured board cannot produce (wrong size or
dictionary), too few corners, blur, a view too oblique or too small, or a pose that does not explain
the corners. Pixel coordinates here follow OpenCV (centre of pixel ``i`` at ``i``), like the
intrinsics in :class:`~robopin.geometry.CameraModel`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from robopin.calibration.errors import BoardConfigError, Rejection
from robopin.geometry.camera_model import CameraModel
from robopin.geometry.transforms import make_transform
from robopin.settings import check_ranges, setting

__all__ = ["BoardConfig", "BoardDetector", "BoardView", "DetectionConfig", "board_image"]

BoardType = Literal["charuco", "aruco_grid"]


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as error:  # pragma: no cover - the calibration requirements install it
        raise ImportError(
            "calibration needs OpenCV: pip install opencv-python-headless (requirements/calibration.txt)"
        ) from error
    return cv2


@dataclass(frozen=True)
class BoardConfig:
    """The physical board: ``charuco``, a chessboard with markers in its white squares, or ``aruco_grid``,
    a grid of markers."""

    type: BoardType = setting("charuco", "board type: charuco or aruco_grid")
    squares_x: int = setting(7, "chessboard squares (charuco) or markers (aruco_grid) along the board's x", min=2)
    squares_y: int = setting(5, "chessboard squares (charuco) or markers (aruco_grid) along the board's y", min=2)
    square_length_m: float = setting(0.04, "chessboard square side (charuco), metres, in (0, 1)")
    marker_length_m: float = setting(0.03, "marker side, metres, in (0, 1); charuco: below square_length_m")
    marker_separation_m: float = setting(0.01, "gap between markers of an aruco_grid, metres, > 0")
    dictionary: str = setting("DICT_5X5_100", "the markers' OpenCV predefined dictionary (DICT_5X5_100, ...)")
    legacy_pattern: bool = setting(False, "a ChArUco board printed by OpenCV < 4.6 with an even number of rows")

    def __post_init__(self) -> None:
        if self.type not in ("charuco", "aruco_grid"):
            raise BoardConfigError(f"board type must be 'charuco' or 'aruco_grid', got {self.type!r}")
        check_ranges(self, BoardConfigError)
        for name in ("square_length_m", "marker_length_m"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and 0.0 < value < 1.0):
                raise BoardConfigError(f"{name} must be in (0, 1) metres, got {value}")
        if self.type == "charuco" and self.marker_length_m >= self.square_length_m:
            raise BoardConfigError(
                f"marker_length_m ({self.marker_length_m}) must be smaller than "
                f"square_length_m ({self.square_length_m})"
            )
        if self.type == "aruco_grid" and not (math.isfinite(self.marker_separation_m) and self.marker_separation_m > 0):
            raise BoardConfigError(
                f"marker_separation_m must be > 0 m for an ArUco grid, got {self.marker_separation_m}"
            )
        cv2 = _cv2()
        if not self.dictionary.startswith("DICT_") or not hasattr(cv2.aruco, self.dictionary):
            raise BoardConfigError(
                f"dictionary {self.dictionary!r} is not an OpenCV predefined dictionary (e.g. DICT_5X5_100)"
            )
        needed = self.marker_count
        size = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary)).bytesList.shape[0]
        if needed > size:
            raise BoardConfigError(
                f"a {self.squares_x}x{self.squares_y} {self.type} board needs {needed} markers; "
                f"{self.dictionary} has {size}"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BoardConfig:
        """Build from a YAML mapping; unknown keys are refused by name."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise BoardConfigError(f"unknown board key(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """Plain mapping for YAML."""
        return asdict(self)

    @property
    def marker_count(self) -> int:
        """Markers on the board (ChArUco: one per white square)."""
        if self.type == "charuco":
            return (self.squares_x * self.squares_y) // 2
        return self.squares_x * self.squares_y

    @property
    def size_m(self) -> tuple[float, float]:
        """Printed pattern width and height in metres (without a margin)."""
        if self.type == "charuco":
            return self.squares_x * self.square_length_m, self.squares_y * self.square_length_m
        step = self.marker_length_m + self.marker_separation_m
        return (
            self.squares_x * step - self.marker_separation_m,
            self.squares_y * step - self.marker_separation_m,
        )

    @property
    def corner_count(self) -> int:
        """Points the board can yield: inner chessboard corners (ChArUco) or marker corners (grid)."""
        if self.type == "charuco":
            return (self.squares_x - 1) * (self.squares_y - 1)
        return 4 * self.marker_count

    def center_m(self) -> NDArray[np.float64]:
        """Centre of the pattern in the board frame."""
        w, h = self.size_m
        return np.array([w / 2.0, h / 2.0, 0.0])

    def opencv_board(self) -> Any:
        """The ``cv2.aruco`` board object."""
        cv2 = _cv2()
        dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        if self.type == "charuco":
            board = cv2.aruco.CharucoBoard(
                (self.squares_x, self.squares_y), self.square_length_m, self.marker_length_m, dictionary
            )
            board.setLegacyPattern(self.legacy_pattern)
            return board
        return cv2.aruco.GridBoard(
            (self.squares_x, self.squares_y), self.marker_length_m, self.marker_separation_m, dictionary
        )


def board_image(config: BoardConfig, pixels_per_metre: float = 4000.0, margin_m: float = 0.01) -> NDArray[np.uint8]:
    """Printable grey image of the board at ``pixels_per_metre`` with a white margin of ``margin_m``.

    The pattern's top-left corner is the board frame's origin, ``margin_m`` in from the image edge.
    """
    if not (math.isfinite(pixels_per_metre) and pixels_per_metre > 0):
        raise BoardConfigError(f"pixels_per_metre must be > 0, got {pixels_per_metre}")
    if not (math.isfinite(margin_m) and margin_m >= 0):
        raise BoardConfigError(f"margin_m must be >= 0, got {margin_m}")
    cv2 = _cv2()
    w, h = config.size_m
    size = (round(w * pixels_per_metre), round(h * pixels_per_metre))
    image = config.opencv_board().generateImage(size, marginSize=0, borderBits=1)
    margin = round(margin_m * pixels_per_metre)
    return cv2.copyMakeBorder(image, margin, margin, margin, margin, cv2.BORDER_CONSTANT, value=255)


@dataclass(frozen=True)
class DetectionConfig:
    """Thresholds that decide whether a view is good enough to calibrate with."""

    min_corners: int = setting(6, "fewest board corners a view must show (a pose needs 4)", min=4)
    min_corner_fraction: float = setting(0.25, "fraction of the board's corners a view must show", min=0.0, max=1.0)
    # Steepest edge inside the board over its contrast: about 1 / edge width in pixels (~0.5 sharp, ~0.22 at a
    # 2-pixel Gaussian blur).
    min_sharpness: float = setting(0.25, "least sharpness of the board's edges (about 1 / edge width, pixels)", min=0.0)
    max_tilt_deg: float = setting(65.0, "largest tilt of the board from facing the camera, degrees", min=0.0, max=90.0)
    min_area_fraction: float = setting(0.01, "least fraction of the image the board covers", min=0.0)
    max_reprojection_px: float = setting(1.0, "largest RMS reprojection error of the board pose, pixels", min=0.0)

    def __post_init__(self) -> None:
        check_ranges(self, BoardConfigError)


@dataclass(frozen=True)
class BoardView:
    """One image's detection: the board pose when ``ok``, else the ``rejection`` and why."""

    ok: bool
    rejection: Rejection | None = None
    message: str = ""
    T_cam_board: NDArray[np.float64] | None = None
    image_points: NDArray[np.float64] | None = None  # (N, 2) OpenCV pixels, as detected (distorted)
    object_points: NDArray[np.float64] | None = None  # (N, 3) board frame, metres
    ideal_points: NDArray[np.float64] | None = None  # (N, 2) the image points undistorted (pinhole K)
    reprojection_rms_px: float = math.nan
    sharpness: float = math.nan
    tilt_deg: float = math.nan
    area_fraction: float = math.nan

    @property
    def corner_count(self) -> int:
        """Corners used for the pose (0 when none)."""
        return 0 if self.image_points is None else len(self.image_points)


class BoardDetector:
    """Detects one configured board in images of one camera and estimates its pose."""

    def __init__(self, board: BoardConfig, detection: DetectionConfig | None = None) -> None:
        cv2 = _cv2()
        self.board = board
        self.config = detection or DetectionConfig()
        self._cv_board = board.opencv_board()
        parameters = cv2.aruco.DetectorParameters()
        parameters.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
        if board.type == "charuco":
            charuco = cv2.aruco.CharucoParameters()
            self._detector = cv2.aruco.CharucoDetector(self._cv_board, charuco, parameters)
        else:
            self._detector = cv2.aruco.ArucoDetector(self._cv_board.getDictionary(), parameters)
        self._valid_ids = set(int(i) for i in np.asarray(self._cv_board.getIds()).reshape(-1))

    def __repr__(self) -> str:
        b = self.board
        return f"BoardDetector({b.type} {b.squares_x}x{b.squares_y}, {b.dictionary})"

    def detect(self, image: NDArray[np.uint8], camera: CameraModel) -> BoardView:
        """Find the board in an RGB (or grey) image taken with ``camera`` and estimate its pose."""
        cv2 = _cv2()
        image = np.asarray(image)
        if image.ndim == 3:
            gray = cv2.cvtColor(np.ascontiguousarray(image[:, :, :3]), cv2.COLOR_RGB2GRAY)
        elif image.ndim == 2:
            gray = image
        else:
            raise ValueError(f"image must be (H, W) grey or (H, W, 3) RGB, got shape {image.shape}")
        if gray.dtype != np.uint8:
            raise ValueError(f"image must be uint8, got {gray.dtype}")
        if gray.shape != (camera.height, camera.width):
            raise ValueError(
                f"image is {gray.shape[1]}x{gray.shape[0]} but the camera model is {camera.width}x{camera.height}"
            )
        if self.board.type == "charuco":
            corners, ids, marker_corners, marker_ids = self._detector.detectBoard(gray)
        else:
            marker_corners, marker_ids, _ = self._detector.detectMarkers(gray)
            corners, ids = marker_corners, marker_ids
        if marker_ids is None or len(marker_ids) == 0:
            return BoardView(False, Rejection.BOARD_NOT_FOUND, f"no {self.board.dictionary} marker found")
        foreign = sorted(set(int(i) for i in np.asarray(marker_ids).reshape(-1)) - self._valid_ids)
        if foreign:
            return BoardView(
                False,
                Rejection.WRONG_BOARD,
                f"marker ids {foreign[:8]} are not on the configured {self.board.squares_x}x{self.board.squares_y} "
                f"board (ids {min(self._valid_ids)}..{max(self._valid_ids)}): wrong board size or dictionary",
            )
        if ids is None or len(ids) == 0:
            return BoardView(False, Rejection.PARTIAL, f"{len(marker_ids)} markers but no board corner could be placed")
        object_points, image_points = self._cv_board.matchImagePoints(corners, ids)
        object_points = np.asarray(object_points, dtype=np.float64).reshape(-1, 3)
        image_points = np.asarray(image_points, dtype=np.float64).reshape(-1, 2)
        needed = max(self.config.min_corners, math.ceil(self.config.min_corner_fraction * self.board.corner_count))
        if len(image_points) < needed:
            return BoardView(
                False,
                Rejection.PARTIAL,
                f"{len(image_points)} of {self.board.corner_count} board corners seen, need {needed}",
                image_points=image_points,
                object_points=object_points,
            )
        spread = np.linalg.svd(object_points[:, :2] - object_points[:, :2].mean(axis=0), compute_uv=False)
        if spread[1] < 1e-3 * max(spread[0], 1e-12) or spread[1] < 0.5 * self.board.marker_length_m:
            return BoardView(
                False, Rejection.ILL_CONDITIONED, "the corners seen lie on one line", image_points=image_points
            )
        hull = cv2.convexHull(image_points.astype(np.float32))
        area_fraction = float(cv2.contourArea(hull)) / float(camera.width * camera.height)
        sharpness = self._sharpness(gray, hull)
        common: dict[str, Any] = dict(
            image_points=image_points, object_points=object_points, sharpness=sharpness, area_fraction=area_fraction
        )
        if sharpness < self.config.min_sharpness:
            return BoardView(
                False, Rejection.BLURRY, f"sharpness {sharpness:.2f} below {self.config.min_sharpness:.2f}", **common
            )
        if area_fraction < self.config.min_area_fraction:
            return BoardView(
                False,
                Rejection.ILL_CONDITIONED,
                f"board covers {100 * area_fraction:.2f}% of the image, "
                f"need {100 * self.config.min_area_fraction:.2f}%",
                **common,
            )
        ideal_points = self._undistort(image_points, camera)
        T_cam_board, rms = self._pose(object_points, ideal_points, camera.K)
        if not math.isfinite(rms):
            return BoardView(
                False, Rejection.ILL_CONDITIONED, "no board pose explains the corners (PnP failed)", **common
            )
        normal_cam = T_cam_board[:3, 2]
        to_camera = -T_cam_board[:3, 3] / np.linalg.norm(T_cam_board[:3, 3])
        # The board's z points into the board, so a board facing the camera has z along the ray.
        tilt_deg = float(np.degrees(np.arccos(np.clip(np.dot(-normal_cam, to_camera), -1.0, 1.0))))
        common.update(T_cam_board=T_cam_board, reprojection_rms_px=rms, tilt_deg=tilt_deg, ideal_points=ideal_points)
        if tilt_deg > self.config.max_tilt_deg:
            return BoardView(
                False,
                Rejection.ILL_CONDITIONED,
                f"board tilted {tilt_deg:.1f} deg from the camera, max {self.config.max_tilt_deg}",
                **common,
            )
        if rms > self.config.max_reprojection_px:
            return BoardView(
                False,
                Rejection.REPROJECTION,
                f"reprojection RMS {rms:.2f} px above {self.config.max_reprojection_px} px: "
                "wrong board size or intrinsics?",
                **common,
            )
        return BoardView(True, **common)

    @staticmethod
    def _sharpness(gray: NDArray[np.uint8], hull: NDArray[np.float32]) -> float:
        """Steepest edges inside the board outline relative to its contrast (about 1 / edge width in px).

        Independent of lighting and print contrast: a step edge blurred by a Gaussian of sigma px has a
        peak gradient of contrast / (2.5 sigma), so ~0.5 is sharp and 0.2 is a 2-pixel blur.
        """
        cv2 = _cv2()
        mask = np.zeros(gray.shape, dtype=np.uint8)
        cv2.fillConvexPoly(mask, hull.reshape(-1, 2).astype(np.int32), 255)
        mask = cv2.erode(mask, np.ones((3, 3), np.uint8)) > 0
        if mask.sum() < 16:
            return 0.0
        image = gray.astype(np.float64)
        gx = cv2.Sobel(image, cv2.CV_64F, 1, 0, ksize=3) / 8.0
        gy = cv2.Sobel(image, cv2.CV_64F, 0, 1, ksize=3) / 8.0
        gradient = np.hypot(gx, gy)[mask]
        low, high = np.percentile(image[mask], [5, 95])
        if high - low < 1e-6:
            return 0.0
        return float(np.percentile(gradient, 99) / (high - low))

    @staticmethod
    def _undistort(image_points: NDArray[np.float64], camera: CameraModel) -> NDArray[np.float64]:
        """Image points as an ideal pinhole camera with the same K would see them."""
        # robopin's own model also covers librealsense's distortion variants that OpenCV lacks;
        # the pixel convention is OpenCV's on both sides.
        x = (image_points[:, 0] - camera.cx) / camera.fx
        y = (image_points[:, 1] - camera.cy) / camera.fy
        xu, yu = camera.undistort_normalized(x, y)
        return np.column_stack([xu * camera.fx + camera.cx, yu * camera.fy + camera.cy])

    @staticmethod
    def _pose(
        object_points: NDArray[np.float64], ideal_points: NDArray[np.float64], K: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], float]:
        """``T_cam_board`` and RMS reprojection error (px) from 2D-3D pairs of a pinhole camera ``K``."""
        cv2 = _cv2()
        flags = cv2.SOLVEPNP_IPPE if np.allclose(object_points[:, 2], 0.0) else cv2.SOLVEPNP_ITERATIVE
        ok, rvec, tvec = cv2.solvePnP(object_points, ideal_points, K, None, flags=flags)
        if not ok:
            return np.eye(4), math.inf
        rvec, tvec = cv2.solvePnPRefineLM(object_points, ideal_points, K, None, rvec, tvec)
        projected, _ = cv2.projectPoints(object_points, rvec, tvec, K, None)
        rms = float(np.sqrt(np.mean(np.sum((projected.reshape(-1, 2) - ideal_points) ** 2, axis=1))))
        R, _ = cv2.Rodrigues(rvec)
        return make_transform(R, tvec.reshape(3)), rms
