"""Forward kinematics of the shared robot description (pinocchio) against pybullet's on the same URDF.

For each robot: one configuration and a 500-configuration batch (what the safety layer samples along a
trajectory), best of several runs, next to pybullet setting the joints and reading the TCP link, and the
largest disagreement between the two. Nothing here passes or fails. Run:

    .venv/bin/python benchmarks/bench_kinematics.py
"""

from __future__ import annotations

import time

import numpy as np
import pybullet

from robopin.geometry.transforms import transform_from_xyz_quaternion
from robopin.robots.description import load_description

BATCH = 500
REPEATS = 20


def best_ms(function, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return 1000.0 * min(times)


def pybullet_kinematics(description):
    """A function (N, dof) -> (N, 4, 4) TCP poses computed by pybullet, and its client to disconnect."""
    client = pybullet.connect(pybullet.DIRECT)
    body = pybullet.loadURDF(str(description.urdf_path), useFixedBase=True, physicsClientId=client)
    joints, links = {}, {}
    for index in range(pybullet.getNumJoints(body, physicsClientId=client)):
        info = pybullet.getJointInfo(body, index, physicsClientId=client)
        joints[info[1].decode()] = index
        links[info[12].decode()] = index
    arm = [joints[name] for name in description.joint_names]
    tcp = links[description.tcp_link]

    def poses(q: np.ndarray) -> np.ndarray:
        out = np.empty((len(q), 4, 4))
        for k, row in enumerate(q):
            for index, value in zip(arm, row, strict=True):
                pybullet.resetJointState(body, index, float(value), physicsClientId=client)
            state = pybullet.getLinkState(body, tcp, computeForwardKinematics=True, physicsClientId=client)
            out[k] = transform_from_xyz_quaternion(state[4], state[5]) @ description.T_link_tcp
        return out

    return poses, client


def measure(name: str) -> None:
    description = load_description(name)
    rng = np.random.default_rng(0)
    q = rng.uniform(description.lower_rad, description.upper_rad, size=(BATCH, description.dof))
    reference, client = pybullet_kinematics(description)
    try:
        rows = {
            "pinocchio": (description.forward_kinematics_batch, description.forward_kinematics),
            "pybullet": (reference, lambda row: reference(row[None])[0]),
        }
        for label, (batch, single) in rows.items():
            single_us = 1000.0 * best_ms(lambda single=single: single(q[0]), repeats=200)
            print(f"{name:<8} {label:<10} {single_us:14.1f} {best_ms(lambda batch=batch: batch(q)):18.2f}")
        disagreement = np.max(np.abs(description.forward_kinematics_batch(q) - reference(q)))
        print(f"{name:<8} largest |pinocchio - pybullet| over {BATCH} configs: {disagreement:.1e}")
    finally:
        pybullet.disconnect(client)


def main() -> None:
    print(f"{'robot':<8} {'':<10} {'1 config (us)':>14} {f'{BATCH} configs (ms)':>18}")
    for name in ("panda", "xarm6"):
        measure(name)


if __name__ == "__main__":
    main()
