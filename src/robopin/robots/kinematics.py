"""Forward kinematics of a described arm on pinocchio, the one kinematic model drivers, safety and planners share."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robopin.robots.errors import ArmConfigError


def import_pinocchio() -> Any:
    """The ``pinocchio`` module (pip ``pin``), imported on first use so importing robopin stays cheap."""
    import pinocchio

    return pinocchio


class ArmKinematics:
    """The arm of ``urdf_path`` as a pinocchio model, with every joint not in ``joint_names`` locked.

    ``locked_joints`` gives the value a locked joint is held at (the gripper held open); others are
    locked at zero. With ``package_dir`` the collision geometry is loaded too (``geometry``), reduced
    the same way. The TCP (``ee``) is ``tcp_link`` · ``T_link_tcp``; poses are in the frame of
    ``base_link`` (default: the URDF's root link). Calls are serialised by a lock, so one instance
    may serve several threads.
    """

    def __init__(
        self,
        urdf_path: Path,
        *,
        joint_names: tuple[str, ...],
        tcp_link: str,
        base_link: str | None = None,
        T_link_tcp: NDArray[np.float64],
        locked_joints: dict[str, float] | None = None,
        package_dir: Path | None = None,
    ) -> None:
        pin = import_pinocchio()
        self._pin = pin
        if not Path(urdf_path).is_file():
            raise ArmConfigError(f"URDF {urdf_path} not found")
        if package_dir is None:
            full_model = pin.buildModelFromUrdf(str(urdf_path))
            full_geometry = None
        else:
            full_model, full_geometry, _ = pin.buildModelsFromUrdf(str(urdf_path), package_dirs=[str(package_dir)])
        locked_joints = dict(locked_joints or {})
        q_reference = pin.neutral(full_model)
        lock_ids = []
        for joint_id in range(1, full_model.njoints):
            name = full_model.names[joint_id]
            if name in joint_names:
                continue
            q_reference[full_model.joints[joint_id].idx_q] = locked_joints.pop(name, 0.0)
            lock_ids.append(joint_id)
        if locked_joints:
            raise ArmConfigError(f"{Path(urdf_path).name}: locked joints {sorted(locked_joints)} are not in the URDF")
        if full_geometry is None:
            self.model = pin.buildReducedModel(full_model, lock_ids, q_reference)
            self.geometry = None
        else:
            self.model, self.geometry = pin.buildReducedModel(full_model, full_geometry, lock_ids, q_reference)
        names = tuple(self.model.names[i] for i in range(1, self.model.njoints))
        if names != tuple(joint_names) or self.model.nq != len(joint_names):
            raise ArmConfigError(f"{Path(urdf_path).name}: arm joints {names}, expected {tuple(joint_names)}")
        self.data = self.model.createData()
        self.tcp_frame = self._frame_id(tcp_link)
        self.T_link_tcp = np.asarray(T_link_tcp, dtype=np.float64)
        # The base link is fixed to the model root; its placement there is constant.
        self._T_base_root = np.eye(4)
        if base_link is not None:
            pin.framesForwardKinematics(self.model, self.data, pin.neutral(self.model))
            self._T_base_root = np.linalg.inv(self.data.oMf[self._frame_id(base_link)].homogeneous)
        self._lock = threading.Lock()

    def _frame_id(self, link: str) -> int:
        frame = self.model.getFrameId(link)
        if frame >= self.model.nframes:
            raise ArmConfigError(f"link {link!r} is not in the kinematic model")
        return frame

    def forward_kinematics(self, q: NDArray[np.float64]) -> NDArray[np.float64]:
        """``T_base_ee`` (4x4) for the arm configuration ``q`` (rad)."""
        return self.forward_kinematics_batch(np.asarray(q, dtype=np.float64).reshape(1, -1))[0]

    def forward_kinematics_batch(self, q: NDArray[np.float64]) -> NDArray[np.float64]:
        """``T_base_ee`` for each row of ``q`` (N, dof): an (N, 4, 4) array."""
        q = np.asarray(q, dtype=np.float64)
        if q.ndim != 2 or q.shape[1] != self.model.nq:
            raise ValueError(f"q must have shape (N, {self.model.nq}), got {q.shape}")
        pin, model, data, frame = self._pin, self.model, self.data, self.tcp_frame
        T_root_link = np.empty((q.shape[0], 4, 4))
        with self._lock:
            for k, row in enumerate(q):
                pin.forwardKinematics(model, data, row)
                T_root_link[k] = pin.updateFramePlacement(model, data, frame).homogeneous
        return self._T_base_root @ T_root_link @ self.T_link_tcp

