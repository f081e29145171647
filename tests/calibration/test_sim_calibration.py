"""End to end in the simulator: textured ChArUco board, guided capture through the planner and the sim
arm, solve, store, load into the projection layer, verify. Ground truth is the simulator's camera mounts."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.calibration import (
    BoardDetector,
    CaptureAbortedError,
    DegenerateSamplesError,
    Rejection,
    capture_sample,
    load_calibration,
    load_mount_for_view,
    run_guided_capture,
    save_calibration,
    solve_samples,
    verify_calibration,
)
from robopin.calibration.simulation import SimCalibrationRig, mount_error
from robopin.geometry import PointRequest, Projector, ViewConfig, ViewData, make_transform

pytest.importorskip("pybullet")
pytestmark = pytest.mark.slow

VIEWS = 7


@pytest.fixture(scope="module", params=["eye_in_hand", "eye_to_hand"])
def calibrated(request, tmp_path_factory):
    """One guided capture + solve per mount kind, shared by the tests below."""
    kind = request.param
    with SimCalibrationRig.build(kind, world_name=f"test-{kind}") as rig:
        arm = rig.make_arm()
        planner = rig.make_planner(arm)
        poses = rig.capture_poses(rig.pose_config(2 * VIEWS + 4, seed=1))
        report = run_guided_capture(arm, planner, poses, rig.grab, BoardDetector(rig.board), max_samples=VIEWS)
        camera = rig.grab().camera
        name = "wrist" if kind == "eye_in_hand" else "static"
        result, record = solve_samples(name, kind, report.samples, camera, board=rig.board)
        path = save_calibration(record, tmp_path_factory.mktemp(kind) / f"{name}.yaml")
        yield {
            "kind": kind,
            "rig": rig,
            "arm": arm,
            "planner": planner,
            "report": report,
            "result": result,
            "path": path,
        }


def test_mount_is_recovered_within_2_mm_and_0_2_deg(calibrated):
    report, result, rig = calibrated["report"], calibrated["result"], calibrated["rig"]
    assert len(report.accepted) == VIEWS, report.summary()
    translation_mm, rotation_deg = mount_error(result.T_mount_cam, rig.T_truth)
    assert translation_mm < 2.0, f"{result.method}: {translation_mm:.2f} mm"
    assert rotation_deg < 0.2, f"{result.method}: {rotation_deg:.3f} deg"
    assert result.heldout is not None and result.heldout_reprojection_px < 1.0


def test_stored_file_round_trips_and_the_projection_layer_uses_it(calibrated):
    rig, path = calibrated["rig"], calibrated["path"]
    record = load_calibration(path)
    mount = load_mount_for_view(path.parent, path.stem)  # what projection_node loads
    assert np.allclose(mount.T_parent_cam, calibrated["result"].T_mount_cam, atol=1e-8)
    assert record.sample_count == VIEWS and record.residuals["heldout"]["translation_rms_mm"] >= 0
    # Project a pixel of the calibrated camera's real depth and compare with the renderer's truth.
    view = rig.world.render(rig.camera_name)
    v, u = 300, 330
    depth = float(view.depth_m[v, u])
    assert depth > 0
    truth = view.T_base_cam @ np.append(view.model.deproject(u + 0.5, v + 0.5, depth), 1.0)
    projector = Projector([ViewConfig(record.name, 0, mount)])
    if mount.kind == "wrist":
        projector.pose_buffer.add(view.stamp_s, rig.world.ee_pose())
    target = projector.project_point(
        PointRequest(u + 0.5, v + 0.5, 0), {0: ViewData(view.depth_m, view.model, view.stamp_s)}
    )
    assert target.valid, target.detail
    assert np.linalg.norm(target.point - truth[:3]) < 0.004


def test_verify_passes_for_the_stored_file_and_fails_for_a_bumped_camera(calibrated):
    rig, record = calibrated["rig"], load_calibration(calibrated["path"])
    poses = rig.capture_poses(rig.pose_config(8, seed=11))
    report = run_guided_capture(
        calibrated["arm"],
        calibrated["planner"],
        poses,
        rig.grab,
        BoardDetector(rig.board),
        max_samples=3,
        min_reachable=1,
    )
    K = rig.grab().camera.K
    good = verify_calibration(record, report.samples, K=K)
    assert good.ok, good.summary()
    assert good.against == "stored_target" and good.views >= 1 and good.reprojection_max_px < 2.0
    record.T_parent_child = record.T_parent_child @ make_transform(t=[0.006, 0.0, 0.0])  # a 6 mm knock
    bumped = verify_calibration(record, report.samples, K=K)
    assert not bumped.ok and bumped.translation_max_mm > 3.0 and bumped.reprojection_max_px > 2.0


def test_missing_board_rejects_views_and_solving_says_so(calibrated):
    rig, arm = calibrated["rig"], calibrated["arm"]
    if calibrated["kind"] == "eye_to_hand":
        pytest.skip("one missing-board case is enough")
    rig.sim_board.sync()
    import pybullet as p

    with rig.world.lock:
        p.resetBasePositionAndOrientation(
            rig.sim_board.body_id, [5.0, 5.0, -1.0], [0, 0, 0, 1], physicsClientId=rig.world.client
        )
    try:
        sample = capture_sample(0, arm, rig.grab_without_sync, BoardDetector(rig.board))
    finally:
        rig.sim_board.sync()
    assert sample.view.rejection is Rejection.BOARD_NOT_FOUND
    with pytest.raises(DegenerateSamplesError, match="1 of 1 views were rejected"):
        solve_samples("wrist", "eye_in_hand", [sample], rig.grab().camera, board=rig.board)


def test_safety_refusal_stops_the_capture_before_anything_moves():
    with SimCalibrationRig.build("eye_in_hand", world_name="test-refusal") as rig:
        arm = rig.make_arm(workspace_max_m=(0.9, 0.9, 0.25))  # every capture pose is higher
        planner = rig.make_planner(arm)
        before = np.array(arm.joint_state().positions)
        with pytest.raises(CaptureAbortedError) as error:
            run_guided_capture(arm, planner, rig.capture_poses(rig.pose_config(6)), rig.grab, BoardDetector(rig.board))
        assert error.value.reason == "safety_refusal"
        assert "workspace" in str(error.value)
        assert np.allclose(arm.joint_state().positions, before, atol=1e-6)


def test_dry_run_plans_without_moving_and_drops_unreachable_poses():
    with SimCalibrationRig.build("eye_in_hand", world_name="test-dry-run") as rig:
        arm = rig.make_arm()
        planner = rig.make_planner(arm)
        poses = rig.capture_poses(rig.pose_config(5))
        poses.insert(2, make_transform(t=[2.0, 0.0, 0.5]) @ poses[0])  # 2 m away: out of reach
        before = np.array(arm.joint_state().positions)
        report = run_guided_capture(
            arm, planner, poses, rig.grab, BoardDetector(rig.board), dry_run_only=True, min_reachable=3
        )
        assert report.dry_run_only and not report.samples
        assert [index for index, _ in report.unreachable] == [2]
        assert np.allclose(arm.joint_state().positions, before, atol=1e-9)
