"""A simulated calibration rig: a workcell with a textured board, the sim arm, a planner and a frame grabber.

Used by the tests, the benchmark and ``robopin calibrate sim``: it runs the same capture and solver
code as a real cell, and knows the ground truth (the sim camera mounts) to score the result against.
Eye-in-hand: the board lies on the table and the wrist camera is calibrated. Eye-to-hand: the hand
holds the board and the static camera is calibrated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robopin.calibration.board import BoardConfig
from robopin.calibration.capture import Frame
from robopin.calibration.handeye import MountKind
from robopin.calibration.poses import PoseGeneratorConfig, eye_in_hand_poses, eye_to_hand_poses
from robopin.calibration.sim_board import SimBoard
from robopin.geometry.transforms import make_transform, rotation_angle

__all__ = ["DEFAULT_STATIC_EYE", "SimCalibrationRig", "mount_error"]

DEFAULT_STATIC_EYE = ((1.25, 0.0, 0.40), (0.50, 0.0, 0.0))
"""Static camera (eye, target) in the base frame: the sim scenarios' default placement."""


def mount_error(T_estimate: NDArray[np.float64], T_truth: NDArray[np.float64]) -> tuple[float, float]:
    """(translation error mm, rotation error deg) between two transforms."""
    return (
        1000.0 * float(np.linalg.norm(T_estimate[:3, 3] - T_truth[:3, 3])),
        float(np.degrees(rotation_angle(T_estimate, T_truth))),
    )


@dataclass
class SimCalibrationRig:
    """Everything a simulated calibration needs; close it when done (it owns the world)."""

    kind: MountKind
    world: Any
    board: BoardConfig
    sim_board: SimBoard
    camera_name: str
    T_truth: NDArray[np.float64]  # ground-truth T_ee_cam (eye-in-hand) or T_base_cam (eye-to-hand)

    @classmethod
    def build(
        cls,
        kind: MountKind,
        *,
        robot: str = "panda",
        world_name: str = "calibration",
        board: BoardConfig | None = None,
        register: bool = True,
        image_size: tuple[int, int] = (640, 480),
    ) -> SimCalibrationRig:
        """A world with the static and wrist cameras of the sim scenarios and a board placed for ``kind``.

        ``image_size`` (width, height) of both cameras; smaller renders are cheaper (tests on busy machines).
        """
        from robopin.sim.render import SimCameraSpec
        from robopin.sim.world import SimWorld, look_at

        board = board or BoardConfig()
        world = SimWorld(world_name, robot, register=register)
        try:
            width, height = image_size
            world.add_camera(
                SimCameraSpec("static", look_at(*DEFAULT_STATIC_EYE), width=width, height=height, vertical_fov_deg=43.0)
            )
            world.add_camera(
                SimCameraSpec(
                    "wrist",
                    world.model.T_ee_wrist_camera,
                    mount="ee",
                    width=width,
                    height=height,
                    vertical_fov_deg=42.0,
                )
            )
            if kind == "eye_in_hand":
                # Face up on the table in front of the robot; board z (into the board) points down.
                center = board.center_m()
                R = np.diag([1.0, -1.0, -1.0])
                T = make_transform(R, np.array([0.5, 0.0, 0.001]) - R @ center)
                sim_board = SimBoard(world, board, T, attach="world")
                camera, truth = "wrist", world.model.T_ee_wrist_camera
            elif kind == "eye_to_hand":
                sim_board = SimBoard(world, board, cls.held_board_pose(board), attach="ee")
                camera, truth = "static", world.camera("static").T_mount_cam
            else:
                raise ValueError(f"kind must be 'eye_in_hand' or 'eye_to_hand', got {kind!r}")
        except Exception:
            world.close()
            raise
        return cls(kind, world, board, sim_board, camera, np.array(truth, dtype=np.float64))

    @staticmethod
    def held_board_pose(board: BoardConfig, standoff_m: float = 0.03) -> NDArray[np.float64]:
        """``T_ee_board`` of a board held square in front of the fingers, pattern facing away from the hand."""
        # Board z (into the board) points back at the hand; pattern centre on the tool axis.
        R = np.diag([1.0, -1.0, -1.0])
        return make_transform(R, np.array([0.0, 0.0, standoff_m]) - R @ board.center_m())

    def pose_config(self, count: int, seed: int = 0) -> PoseGeneratorConfig:
        """Capture distances that suit this rig: a wrist camera close over the board, a held board well
        inside the arm's reach in front of the static camera."""
        if self.kind == "eye_in_hand":
            return PoseGeneratorConfig(count=count, seed=seed)
        return PoseGeneratorConfig(count=count, seed=seed, min_distance_m=0.5, max_distance_m=0.8)

    def capture_poses(self, config: PoseGeneratorConfig) -> list[NDArray[np.float64]]:
        """Generated hand targets for this rig (nominal mounts = the designed ones, as on a real cell)."""
        if self.kind == "eye_in_hand":
            return eye_in_hand_poses(
                self.sim_board.T_parent_board, self.board.center_m(), self.world.model.T_ee_wrist_camera, config
            )
        return eye_to_hand_poses(
            self.world.camera("static").T_mount_cam,
            self.sim_board.T_parent_board,
            self.board.center_m(),
            config,
            min_center_height_m=0.2,  # keeps the hand clear of the table
        )

    def make_arm(self, *, dry_run: bool = False, **safety_overrides: Any) -> Any:
        """A connected, enabled sim arm on this rig's world (``safety_overrides``: SafetyConfig fields).

        The watchdog's freshness limits are relaxed (2 s instead of a real driver's 0.25 s): on a shared
        CI machine the simulator's thread can pause that long, which says nothing about calibration.
        """
        from robopin.robots.safety import SafetyConfig
        from robopin.sim.arm import SimArm, SimArmConfig

        safety = SafetyConfig(**{"state_max_age_s": 2.0, "command_timeout_s": 2.0, **safety_overrides})
        arm = SimArm(SimArmConfig(robot=self.world.model.name, world=self.world.name, safety=safety, dry_run=dry_run))
        arm.connect()
        arm.enable()
        return arm

    def make_planner(self, arm: Any, planner_type: str = "roboplan") -> Any:
        """The robot's motion planner with the table as an obstacle, kept inside the arm's safety limits."""
        from robopin.calibration.capture import make_capture_planner

        return make_capture_planner(arm, {"type": planner_type}, table_height_m=0.0)

    def grab(self, not_before_s: float = 0.0) -> Frame:
        """Render the calibrated camera now (the world state is the settled arm's)."""
        self.sim_board.sync()
        view = self.world.render(self.camera_name)
        return Frame(view.color, view.model, max(time.monotonic(), not_before_s))

    def grab_without_sync(self, not_before_s: float = 0.0) -> Frame:
        """Render without moving the board body first (tests that move the board themselves)."""
        view = self.world.render(self.camera_name)
        return Frame(view.color, view.model, max(time.monotonic(), not_before_s))

    def close(self) -> None:
        """Remove the board and close the world."""
        self.sim_board.remove()
        self.world.close()

    def __enter__(self) -> SimCalibrationRig:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
