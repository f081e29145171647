"""``robopin calibrate …``: camera calibration from the command line.

* ``board``: write a printable board image (PNG) and print its geometry.
* ``sim``: calibrate a simulated wrist (eye-in-hand) or static (eye-to-hand) camera end to end and
  report the error against the simulator's ground truth.
* ``solve``: solve again from a samples file written by a capture (e.g. with another method).
* ``show``: print a stored calibration and what it means.
* ``verify``: re-measure the board and report the stored calibration's error (in the simulator; on a
  real cell call the calibration node's ``~/verify`` service).

On a real cell the capture runs in ``calibration_node`` (guided through the motion planner, or manual
with a key press), which has the camera topics and the arm.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

logger = logging.getLogger(__name__)


def register(subparsers) -> None:
    """Add ``robopin calibrate`` and its subcommands."""
    parser = subparsers.add_parser("calibrate", help="camera calibration (hand-eye, extrinsics, verify)")
    commands = parser.add_subparsers(dest="calibrate_command", metavar="STEP")
    parser.set_defaults(func=lambda _args: (parser.print_help(), 2)[1])

    board = commands.add_parser("board", help="write a printable ChArUco / ArUco grid board image")
    _board_arguments(board)
    board.add_argument("--out", type=Path, required=True, help="PNG file to write")
    board.add_argument("--dpi", type=float, default=300.0, help="print resolution (dots per inch)")
    board.set_defaults(func=_board)

    sim = commands.add_parser("sim", help="calibrate a simulated camera end to end and score it")
    sim.add_argument("--kind", choices=("eye_in_hand", "eye_to_hand"), default="eye_in_hand")
    sim.add_argument("--poses", type=int, default=15, help="views to capture")
    sim.add_argument("--method", default="auto", help="hand-eye method or auto (lowest held-out error)")
    sim.add_argument("--robot", default="panda")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--name", default="", help="calibration name (default: wrist / static)")
    sim.add_argument("--out", type=Path, default=None, help="folder to store <name>.yaml in (default: none)")
    sim.add_argument("--dry-run", action="store_true", help="plan and safety-check the poses only")
    sim.set_defaults(func=_sim)

    solve = commands.add_parser("solve", help="solve from a samples file written by a capture")
    solve.add_argument("samples", type=Path)
    solve.add_argument("--method", default="auto")
    solve.add_argument("--json", action="store_true", help="print the result as JSON")
    solve.set_defaults(func=_solve)

    show = commands.add_parser("show", help="print a stored calibration")
    show.add_argument("file", type=Path)
    show.set_defaults(func=_show)

    verify = commands.add_parser("verify", help="re-measure the board in the simulator and check a stored file")
    verify.add_argument("file", type=Path)
    verify.add_argument("--poses", type=int, default=4)
    verify.add_argument("--seed", type=int, default=7)
    verify.add_argument("--tolerance-mm", type=float, default=3.0)
    verify.add_argument("--tolerance-deg", type=float, default=0.3)
    verify.set_defaults(func=_verify)


def _board_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--type", choices=("charuco", "aruco_grid"), default="charuco")
    parser.add_argument("--squares", type=int, nargs=2, default=(7, 5), metavar=("X", "Y"))
    parser.add_argument("--square-length", type=float, default=0.04, help="metres")
    parser.add_argument("--marker-length", type=float, default=0.03, help="metres")
    parser.add_argument("--separation", type=float, default=0.01, help="metres (ArUco grid)")
    parser.add_argument("--dictionary", default="DICT_5X5_100")


def _board_config(args: argparse.Namespace):
    from robopin.calibration import BoardConfig

    return BoardConfig(
        type=args.type,
        squares_x=args.squares[0],
        squares_y=args.squares[1],
        square_length_m=args.square_length,
        marker_length_m=args.marker_length,
        marker_separation_m=args.separation,
        dictionary=args.dictionary,
    )


def _board(args: argparse.Namespace) -> int:
    import cv2

    from robopin.calibration import board_image

    config = _board_config(args)
    image = board_image(config, pixels_per_metre=args.dpi / 0.0254)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(args.out), image):
        print(f"could not write {args.out}", file=sys.stderr)
        return 1
    w, h = config.size_m
    print(f"wrote {args.out}: {config.type} {config.squares_x}x{config.squares_y}, {w * 1000:.0f} x {h * 1000:.0f} mm")
    print("print at 100% scale and measure a square: the board config must state its true size")
    print(json.dumps(config.to_dict()))
    return 0


def _sim(args: argparse.Namespace) -> int:
    from robopin.calibration import BoardDetector, CaptureAbortedError, run_guided_capture, save_calibration
    from robopin.calibration.handeye import SolverConfig
    from robopin.calibration.simulation import SimCalibrationRig, mount_error
    from robopin.calibration.workflow import solve_samples

    name = args.name or ("wrist" if args.kind == "eye_in_hand" else "static")
    started = time.monotonic()
    with SimCalibrationRig.build(args.kind, robot=args.robot, world_name=f"calibrate-{name}") as rig:
        arm = rig.make_arm()
        planner = rig.make_planner(arm)
        # Generate spare poses: some are unreachable and are dropped in the dry run.
        poses = rig.capture_poses(rig.pose_config(2 * args.poses + 4, seed=args.seed))
        try:
            report = run_guided_capture(
                arm,
                planner,
                poses,
                rig.grab,
                BoardDetector(rig.board),
                max_samples=args.poses,
                dry_run_only=args.dry_run,
            )
        except CaptureAbortedError as error:
            print(f"capture stopped: {error}", file=sys.stderr)
            return 1
        print(report.summary())
        if args.dry_run:
            return 0
        camera = rig.grab().camera
        result, record = solve_samples(
            name, args.kind, report.samples, camera, board=rig.board, solver=SolverConfig(method=args.method)
        )
        error_mm, error_deg = mount_error(result.T_mount_cam, rig.T_truth)
    held = result.heldout or result.fit
    pixels = f", {result.heldout_reprojection_px:.2f} px" if result.heldout_reprojection_px is not None else ""
    print(
        f"{name}: method {result.method}, {result.sample_count} views; held-out views disagree with their "
        f"own PnP poses by {held.translation_rms_mm:.2f} mm / {held.rotation_rms_deg:.3f} deg{pixels}"
    )
    print(f"error against the simulator's ground truth: {error_mm:.2f} mm, {error_deg:.3f} deg")
    print(f"total time {time.monotonic() - started:.1f} s")
    if args.out is not None:
        print(f"stored {save_calibration(record, args.out / f'{name}.yaml')}")
    return 0


def _solve(args: argparse.Namespace) -> int:
    from robopin.calibration import SolverConfig, load_samples, solve_hand_eye

    kind, samples = load_samples(args.samples)
    usable = [s for s in samples if s.view.ok]
    result = solve_hand_eye(
        kind, [s.T_base_ee for s in usable], [s.view.T_cam_board for s in usable], SolverConfig(method=args.method)
    )
    summary = {
        "kind": kind,
        "method": result.method,
        "T_mount_cam": result.T_mount_cam.round(9).tolist(),
        "fit": result.fit.to_dict(),
        "heldout": result.heldout.to_dict() if result.heldout else None,
        "methods": result.per_method,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{kind}: {result.method} over {result.sample_count} samples; fit {result.fit.to_dict()}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from robopin.calibration import load_calibration
    from robopin.geometry import matrix_to_rpy

    record = load_calibration(args.file)
    T = record.T_parent_child
    print(f"{record.name}: {record.kind}, T_{record.parent_frame}_{record.child_frame}")
    print(f"  maps points in {record.child_frame} into {record.parent_frame}")
    print(f"  {record.child_frame} origin in {record.parent_frame}: {T[:3, 3].round(5).tolist()} m")
    print(f"  rpy (rad): {matrix_to_rpy(T).round(5).tolist()}")
    print(f"  method {record.method}, {record.sample_count} samples, {record.date}")
    print(f"  residuals: {json.dumps({k: v for k, v in record.residuals.items() if k != 'methods'})}")
    camera = record.camera
    print(f"  camera: serial {camera.get('serial') or '?'}, {camera.get('width')}x{camera.get('height')}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from robopin.calibration import BoardConfig, BoardDetector, load_calibration, run_guided_capture
    from robopin.calibration.simulation import SimCalibrationRig
    from robopin.calibration.verify import verify_calibration

    record = load_calibration(args.file)
    board = BoardConfig.from_dict(record.board) if record.board else BoardConfig()
    with SimCalibrationRig.build(record.kind, board=board, world_name=f"verify-{record.name}") as rig:
        arm = rig.make_arm()
        planner = rig.make_planner(arm)
        poses = rig.capture_poses(rig.pose_config(2 * args.poses + 4, seed=args.seed))
        report = run_guided_capture(
            arm, planner, poses, rig.grab, BoardDetector(board), max_samples=args.poses, min_reachable=1
        )
        K = rig.grab().camera.K
    result = verify_calibration(
        record, report.samples, tolerance_mm=args.tolerance_mm, tolerance_deg=args.tolerance_deg, K=K
    )
    print(result.summary())
    return 0 if result.ok else 1
