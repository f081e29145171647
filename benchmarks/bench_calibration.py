"""Calibration benchmark: time to calibrate in the simulator and error versus number of poses.

For each mount kind one guided capture runs through the real capture code (planner dry run, sim arm,
TinyRenderer views of a textured ChArUco board). Solutions on the first 5, 10, 20 views are scored
against the simulator's ground-truth mount. Baselines measured in the same run:
* error: OpenCV's best closed-form hand-eye method alone (no reprojection refinement) on the same views;
* time: one bare render of the same camera (the floor of any per-view cost in this simulator).
Figures only, never pass/fail. Run: .venv/bin/python benchmarks/bench_calibration.py
[--views 20 --static-views 10] (about 2 minutes on 2 shared cores).
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from robopin.calibration import BoardDetector, SolverConfig, run_guided_capture, solve_hand_eye
from robopin.calibration.handeye import Corners
from robopin.calibration.simulation import SimCalibrationRig, mount_error


def ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}x" if baseline > 0 else "n/a"


def bench_kind(kind: str, views: int, subsets: list[int], seed: int) -> None:
    with SimCalibrationRig.build(kind, world_name=f"bench-{kind}") as rig:
        arm = rig.make_arm()
        planner = rig.make_planner(arm)
        rig.grab()  # first render pays texture upload; keep it out of the figures
        started = time.perf_counter()
        rig.grab()
        render_s = time.perf_counter() - started
        poses = rig.capture_poses(rig.pose_config(2 * views + 4, seed=seed))
        started = time.perf_counter()
        report = run_guided_capture(arm, planner, poses, rig.grab, BoardDetector(rig.board), max_samples=views)
        capture_s = time.perf_counter() - started
        camera = rig.grab().camera
        usable = report.accepted
        solve_started = time.perf_counter()
        ee = [s.T_base_ee for s in usable]
        cams = [s.view.T_cam_board for s in usable]
        corners = [Corners(s.view.object_points, s.view.ideal_points, camera.K) for s in usable]
        solve_hand_eye(kind, ee, cams, SolverConfig(), corners)
        solve_s = time.perf_counter() - solve_started
        per_view = capture_s / max(len(usable), 1)
        print(f"\n== {kind} ({'wrist camera' if kind == 'eye_in_hand' else 'static camera'}) ==")
        print(f"capture: {report.summary()}")
        print(f"calibration time for {len(usable)} views: capture {capture_s:.1f} s + solve {solve_s:.1f} s")
        print(f"  per view {per_view:.2f} s = {ratio(per_view, render_s)} of one bare render ({render_s:.2f} s)")
        print(
            f"{'views':>5}  {'method':<18} {'err mm':>7} {'err deg':>8} | {'closed-form mm':>14} {'deg':>6} | ratio mm"
        )
        for n in subsets:
            if n > len(usable):
                continue
            full = solve_hand_eye(kind, ee[:n], cams[:n], SolverConfig(), corners[:n])
            plain = solve_hand_eye(kind, ee[:n], cams[:n], SolverConfig(refine=False))
            mm, deg = mount_error(full.T_mount_cam, rig.T_truth)
            base_mm, base_deg = mount_error(plain.T_mount_cam, rig.T_truth)
            print(
                f"{n:>5}  {full.method:<18} {mm:>7.2f} {deg:>8.3f} | {base_mm:>14.2f} {base_deg:>6.3f} | "
                f"{ratio(mm, base_mm)}"
            )
        # Every OpenCV method on all views, for choosing the default.
        print("all methods on every view (closed form, then refined from it):")
        for method in ("tsai", "park", "horaud", "andreff", "daniilidis", "shah", "li"):
            config = SolverConfig(method=method, heldout=False)
            plain = solve_hand_eye(kind, ee, cams, SolverConfig(method=method, heldout=False, refine=False))
            refined = solve_hand_eye(kind, ee, cams, config, corners)
            mm, deg = mount_error(plain.T_mount_cam, rig.T_truth)
            rmm, rdeg = mount_error(refined.T_mount_cam, rig.T_truth)
            print(f"  {method:<11} {mm:6.2f} mm {deg:6.3f} deg -> refined {rmm:6.2f} mm {rdeg:6.3f} deg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", type=int, default=20, help="wrist camera (eye-in-hand) views")
    parser.add_argument(
        "--static-views", type=int, default=10, help="static camera views (its moves are longer: 0 skips it)"
    )
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    np.set_printoptions(precision=4, suppress=True)
    for kind, views in (("eye_in_hand", args.views), ("eye_to_hand", args.static_views)):
        if views > 0:
            bench_kind(kind, views, sorted({5, 10, views}), args.seed)


if __name__ == "__main__":
    main()
