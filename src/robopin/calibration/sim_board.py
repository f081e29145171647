"""A calibration board textured into a simulated workcell (pybullet), fixed in the world or held by the hand.

The texture is generated with OpenCV at run time into a temporary folder (nothing binary is stored
in the repository) and mapped onto a double-sided quad whose UVs put the pattern exactly where the
board frame says, so the ground-truth pose of every rendered board is known. The board has no
collision shape: it never disturbs the physics or the arm.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from robopin.calibration.board import BoardConfig, board_image
from robopin.geometry.transforms import as_transform, transform_to_xyz_quaternion

__all__ = ["SimBoard"]


class SimBoard:
    """A board body in a :class:`~robopin.sim.world.SimWorld`.

    ``attach="world"``: the board stays at ``T_parent_board`` = ``T_base_board``. ``attach="ee"``: it
    follows the hand at ``T_parent_board`` = ``T_ee_board`` (moved before every physics step and
    before each render via :meth:`sync`), as a board clamped in the gripper would.
    """

    def __init__(
        self,
        world: object,
        board: BoardConfig,
        T_parent_board: NDArray[np.float64],
        attach: str = "world",
        *,
        pixels_per_metre: float = 2000.0,
        margin_m: float = 0.01,
    ) -> None:
        import cv2
        import pybullet as p

        if attach not in ("world", "ee"):
            raise ValueError(f"attach must be 'world' or 'ee', got {attach!r}")
        self.world = world
        self.board = board
        self.attach = attach
        self.T_parent_board = as_transform(T_parent_board, "T_parent_board").copy()
        self._p = p
        self._folder = tempfile.TemporaryDirectory(prefix="robopin-board-")
        folder = Path(self._folder.name)
        image = board_image(board, pixels_per_metre, margin_m)
        cv2.imwrite(str(folder / "board.png"), cv2.cvtColor(image, cv2.COLOR_GRAY2BGR))
        w, h = board.size_m
        x0, y0, x1, y1 = -margin_m, -margin_m, w + margin_m, h + margin_m
        # Image row 0 (texture v = 1) is board y = y0; both windings so either side renders.
        (folder / "board.obj").write_text(
            f"v {x0} {y0} 0\nv {x1} {y0} 0\nv {x1} {y1} 0\nv {x0} {y1} 0\n"
            "vt 0 1\nvt 1 1\nvt 1 0\nvt 0 0\nvn 0 0 -1\nvn 0 0 1\n"
            "f 1/1/1 2/2/1 3/3/1\nf 1/1/1 3/3/1 4/4/1\nf 3/3/2 2/2/2 1/1/2\nf 4/4/2 3/3/2 1/1/2\n"
        )
        client = world.client
        with world.lock:
            visual = p.createVisualShape(p.GEOM_MESH, fileName=str(folder / "board.obj"), physicsClientId=client)
            xyz, quaternion = transform_to_xyz_quaternion(self.T_base_board())
            self.body_id = p.createMultiBody(0, -1, visual, xyz.tolist(), quaternion.tolist(), physicsClientId=client)
            texture = p.loadTexture(str(folder / "board.png"), physicsClientId=client)
            p.changeVisualShape(
                self.body_id, -1, textureUniqueId=texture, rgbaColor=[1, 1, 1, 1], physicsClientId=client
            )
        if attach == "ee":
            world.add_step_callback(self._on_step)

    def T_base_board(self) -> NDArray[np.float64]:
        """Ground-truth board pose in the base frame now."""
        if self.attach == "world":
            return self.T_parent_board
        return self.world.ee_pose() @ self.T_parent_board

    def sync(self) -> None:
        """Move the board body to where it belongs now (a held board follows the hand)."""
        with self.world.lock:
            xyz, quaternion = transform_to_xyz_quaternion(self.T_base_board())
            self._p.resetBasePositionAndOrientation(
                self.body_id, xyz.tolist(), quaternion.tolist(), physicsClientId=self.world.client
            )

    def _on_step(self, _sim_time_s: float) -> None:
        self.sync()

    def remove(self) -> None:
        """Take the board out of the world and delete its texture files."""
        if self.attach == "ee":
            self.world.remove_step_callback(self._on_step)
        try:
            with self.world.lock:
                self._p.removeBody(self.body_id, physicsClientId=self.world.client)
        except Exception:  # the world may already be closed; the files still go
            pass
        self._folder.cleanup()
