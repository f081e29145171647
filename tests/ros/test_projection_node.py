"""projection_node over real DDS: a pybullet scene's static and wrist views in, 3D targets out.

The test process renders the simulated workcell once, then streams both views' aligned depth and
CameraInfo (realsense-ros topics) and the end-effector pose, as a camera driver and an arm driver
would. The node runs as its own process; ground truth is the physics engine's object poses.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
import yaml
from geometry_msgs.msg import PoseStamped
from robopin_interfaces.msg import Anchor
from robopin_interfaces.srv import ProjectPoints
from robopin_ros import conversions
from robopin_ros.actions import ask
from sensor_msgs.msg import CameraInfo, Image, JointState, PointCloud2
from visualization_msgs.msg import Marker, MarkerArray

from robopin.geometry import CameraModel, depth_image_to_meters, transform_from_xyz_rpy, transform_points
from tests.geometry.geometry_scenes import pybullet_image_point
from tests.ros.rostest_utils import SpunNode, start_process, stop_process, wait_for, wait_future

pybullet = pytest.importorskip("pybullet")

pytestmark = [pytest.mark.ros, pytest.mark.slow]

T_EE_WRIST = transform_from_xyz_rpy([0.07, 0.0, -0.06], [0.0, 0.12, math.pi / 2])
OBJECTS = [("cube", "cube_0", (0.42, -0.10), 0.3), ("toy_block", "block_0", (0.55, 0.12), -0.5)]
VIEWS = ("static_cam", "wrist_cam", "static_raw")
# "static_raw" is the static camera with its depth left unaligned: depth comes from a wider depth
# camera 5 cm to the side (as on a RealSense), registered to color inside the node.
T_COLOR_DEPTH = transform_from_xyz_rpy([0.05, 0.003, -0.002], [0.01, -0.015, 0.02])


@pytest.fixture(scope="module")
def scene():
    """Render both views once; ground-truth top-face points of each object and where each view sees them."""
    from robopin.sim.render import SimCameraSpec
    from robopin.sim.world import SimWorld, look_at, top_down_grasp

    world = SimWorld("projection-node-test", robot="panda", register=False)
    try:
        for kind, name, xy, yaw in OBJECTS:
            world.add_object(kind, name, xy, yaw)
        world.settle()
        world.add_camera(SimCameraSpec("static_cam", look_at([1.05, 0.45, 0.65], [0.45, 0.0, 0.0])))
        world.add_camera(SimCameraSpec("wrist_cam", T_EE_WRIST, mount="ee", vertical_fov_deg=58.0))
        T_base_static = world.camera("static_cam").T_mount_cam
        world.add_camera(SimCameraSpec("static_depth", T_base_static @ T_COLOR_DEPTH, vertical_fov_deg=58.0))
        world.reset_arm(world.inverse_kinematics(top_down_grasp([0.47, 0.0, 0.40], 0.0)))
        views = {}
        for img_idx, name in enumerate(VIEWS[:2]):
            spec = world.camera(name)
            shot = world.render(name)
            projection = pybullet.computeProjectionMatrixFOV(
                spec.vertical_fov_deg, spec.aspect, spec.near_m, spec.far_m
            )
            views[img_idx] = {
                "name": name,
                "camera": CameraModel.from_pybullet_projection(projection, spec.width, spec.height),
                "depth_m": depth_image_to_meters(shot.depth_m),
                "T_base_cam": shot.T_base_cam,
                "points": [],
            }
            for _, obj_name, _, _ in OBJECTS:
                obj = world.object(obj_name)
                truth = transform_points(world.object_pose(obj_name), np.array([0.0, 0.0, obj.height_m / 2]))
                # Where the renderer shows the point: OpenGL maths, independent of CameraModel.
                u, v = pybullet_image_point(shot.T_base_cam, projection, spec.width, spec.height, truth)
                seen = world.object_by_body(int(shot.segmentation[math.floor(v), math.floor(u)]))
                if 0 <= u < spec.width and 0 <= v < spec.height and seen is obj:
                    views[img_idx]["points"].append((obj_name, u, v, truth))
        depth_spec = world.camera("static_depth")
        depth_projection = pybullet.computeProjectionMatrixFOV(
            depth_spec.vertical_fov_deg, depth_spec.aspect, depth_spec.near_m, depth_spec.far_m
        )
        views[2] = {
            **views[0],
            "name": "static_raw",
            "depth_m": depth_image_to_meters(world.render("static_depth").depth_m),
            "depth_camera": CameraModel.from_pybullet_projection(depth_projection, depth_spec.width, depth_spec.height),
        }
        T_base_ee = world.ee_pose()
        q_arm = world.joint_positions()
    finally:
        world.close()
    assert all(len(views[i]["points"]) == len(OBJECTS) for i in views), "each view must see every object"
    return {"views": views, "T_base_ee": T_base_ee, "q_arm": q_arm, "T_base_static": T_base_static}


def start_projection_node(scene, folder, extra_params: dict, remaps: tuple[str, ...] = ()):
    calibrations = {
        "static_cam": {"parent_frame": "base", "matrix": scene["T_base_static"].tolist()},
        "wrist_cam": {"parent_frame": "ee", "matrix": T_EE_WRIST.tolist()},
        "static_raw": {"parent_frame": "base", "matrix": scene["T_base_static"].tolist()},
    }
    parameters = {
        "views": list(VIEWS),
        "calibrations": yaml.safe_dump(calibrations),
        "unaligned_depth": yaml.safe_dump({"static_raw": {"matrix": T_COLOR_DEPTH.tolist()}}),
        "workspace": yaml.safe_dump({"min_xyz": [0.1, -0.5, -0.02], "max_xyz": [0.9, 0.5, 0.6]}),
        "max_frame_age_s": 5.0,
        "pose_tolerance_s": 0.05,
        **extra_params,
    }
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump({"projection_node": {"ros__parameters": parameters}}))
    args = ["-m", "robopin_ros.projection_node", "--ros-args", "--params-file", str(path)]
    for remap in remaps:
        args += ["-r", remap]
    return start_process(args)


@pytest.fixture(scope="module")
def projection_node(scene, tmp_path_factory):
    process = start_projection_node(scene, tmp_path_factory.mktemp("projection"), {})
    yield process
    code, output = stop_process(process)
    assert code == 0, f"projection_node did not shut down cleanly on SIGTERM (exit {code}):\n{output}"


@pytest.fixture
def client(ros_context, scene, projection_node):
    """A node streaming both views and the arm pose at 10 Hz (stamped now), plus a ProjectPoints client."""
    spun = SpunNode("projection_test_client", ros_context)
    node = spun.node
    pubs = {}
    for img_idx, view in scene["views"].items():
        prefix = f"/cameras/{view['name']}"
        depth_topic = "depth/image_rect_raw" if "depth_camera" in view else "aligned_depth_to_color/image_raw"
        pubs[img_idx] = (
            node.create_publisher(Image, f"{prefix}/{depth_topic}", 5),
            node.create_publisher(CameraInfo, f"{prefix}/color/camera_info", 5),
            node.create_publisher(CameraInfo, f"{prefix}/depth/camera_info", 5),
        )
    pose_pub = node.create_publisher(PoseStamped, "/robopin/arm/ee_pose", 10)
    joints_pub = node.create_publisher(JointState, "/joint_states", 10)
    joint_names = [f"panda_joint{i}" for i in range(1, 8)]

    def stream() -> None:
        stamp = time.time()
        pose = PoseStamped(
            header=conversions.make_header(stamp, "base"), pose=conversions.matrix_to_pose(scene["T_base_ee"])
        )
        pose_pub.publish(pose)
        joints = JointState(
            header=conversions.make_header(stamp, ""), name=joint_names, position=[float(q) for q in scene["q_arm"]]
        )
        joints_pub.publish(joints)
        for img_idx, view in scene["views"].items():
            header = conversions.make_header(stamp, f"{view['name']}_optical")
            depth_pub, info_pub, depth_info_pub = pubs[img_idx]
            depth_pub.publish(conversions.depth_to_image_msg(view["depth_m"], header))
            info_pub.publish(conversions.camera_model_to_camera_info(view["camera"], header))
            if "depth_camera" in view:
                depth_info_pub.publish(conversions.camera_model_to_camera_info(view["depth_camera"], header))

    node.create_timer(0.1, stream)
    service = node.create_client(ProjectPoints, "/robopin/project_points")
    assert service.wait_for_service(timeout_sec=30), "ProjectPoints service not discovered"
    yield spun, service
    spun.close()


def ground_truth_anchors(scene) -> tuple[list[Anchor], list[np.ndarray]]:
    anchors, truths = [], []
    for img_idx, view in scene["views"].items():
        for obj_name, u, v, truth in view["points"]:
            anchors.append(anchor(img_idx, u, v, f"{obj_name}@{view['name']}", obj_name))
            truths.append(truth)
    return anchors, truths


def call(service, anchors, target_frame: str = "", wait_for_frames: bool = True) -> ProjectPoints.Response:
    """Call ProjectPoints; while the node has not yet received frames of every view, try again.

    Views start streaming independently: a reply may succeed for one view while another still has no
    frame (its targets refused as unknown_view), or a wrist frame whose arm pose has not arrived yet
    (stale_pose), so these cases are retried until the deadline.
    """
    deadline = time.monotonic() + 20
    while True:
        # Asked again while unanswered: a node started moments ago may drop its first replies (robopin_ros.actions.ask).
        reply = ask(service, ProjectPoints.Request(anchors=anchors, target_frame=target_frame), 10)
        if reply is None:
            raise TimeoutError("timed out after 10 s waiting for a ProjectPoints reply")
        # img_idx 0..2 are the node's views (static_cam, wrist_cam, static_raw); others are refusal cases.
        waiting = not reply.success or any(
            t.reason in ("unknown_view", "stale_pose") and a.img_idx <= 2
            for t, a in zip(reply.targets, anchors, strict=True)
        )
        if not waiting or not wait_for_frames or time.monotonic() > deadline:
            return reply
        time.sleep(0.2)


def anchor(img_idx: int, u: float, v: float, anchor_id: str = "", name: str = "") -> Anchor:
    return Anchor(
        kind="obj", name=name, id=anchor_id, img_idx=img_idx, x=math.nan, y=math.nan, u=u, v=v, char_offset=-1
    )


def test_static_wrist_and_unaligned_targets_within_5_mm_of_ground_truth(scene, client):
    _, service = client
    anchors, truths = ground_truth_anchors(scene)
    reply = call(service, anchors)
    assert reply.success, reply.message
    assert len(reply.targets) == len(anchors)
    errors = [
        np.linalg.norm(conversions.point_to_vector(t.point) - p) for t, p in zip(reply.targets, truths, strict=True)
    ]
    print(
        "projection_node errors (mm):",
        {t.id: round(float(e) * 1000, 2) for t, e in zip(reply.targets, errors, strict=True)},
    )
    for target, truth, sent in zip(reply.targets, truths, anchors, strict=True):
        assert target.valid, (target.id, target.reason)
        assert target.header.frame_id == "base"
        assert target.source_view == VIEWS[sent.img_idx]
        error = np.linalg.norm(conversions.point_to_vector(target.point) - truth)
        assert error < 0.005, f"{target.id}: {error * 1000:.2f} mm from the true surface point"
        assert conversions.point_to_vector(target.normal) @ [0, 0, 1] > math.cos(math.radians(10))
        assert target.depth_valid_fraction > 0.9
        # The spread includes the surface's slope across the window: finite, a few millimetres.
        assert 0.0 <= target.depth_spread_m < 0.02


def test_named_refusals_and_normalized_points(scene, client):
    _, service = client
    _, u0, v0, _ = scene["views"][0]["points"][0]
    _, wu, wv, _ = scene["views"][1]["points"][1]
    width, height = scene["views"][0]["camera"].width, scene["views"][0]["camera"].height
    from_model = Anchor(
        kind="obj",
        name="cube",
        id="obj_09",
        img_idx=0,
        x=u0 / width * 1000,
        y=v0 / height * 1000,
        u=math.nan,
        v=math.nan,
        char_offset=-1,
    )
    anchors = [
        anchor(5, 10.0, 10.0, "obj_01"),  # no view 5
        anchor(0, -4.0, 10.0, "obj_02"),  # off the image
        anchor(0, u0, v0, "obj_03"),  # the cube in the static view ...
        anchor(1, wu, wv, "obj_03"),  # ... and "the same" anchor on the block in the wrist view
        from_model,  # pixels filled in from the model's 0..1000 point
    ]
    reply = call(service, anchors)
    assert reply.success, reply.message
    reasons = [t.reason for t in reply.targets]
    assert reasons[:4] == ["unknown_view", "out_of_image", "views_disagree", "views_disagree"]
    assert [t.valid for t in reply.targets] == [False, False, False, False, True]
    assert abs(reply.targets[4].u - u0) < 1e-6


def test_a_request_with_a_stamp_projects_on_the_frame_of_that_stamp(scene, client):
    """The frame a model reasoned on (the observation's stamp), not whatever frame is newest when it answers."""
    _, service = client
    _, u0, v0, _ = scene["views"][0]["points"][0]
    points = [anchor(0, u0, v0, "obj_01")]
    latest = call(service, points)
    assert latest.success, latest.message
    seen = conversions.stamp_to_seconds(latest.targets[0].header.stamp)
    time.sleep(0.5)  # the client streams at 10 Hz: several newer frames arrive meanwhile

    def at(stamp_s: float) -> ProjectPoints.Response:
        request = ProjectPoints.Request(anchors=points, stamp=conversions.seconds_to_stamp(stamp_s))
        return wait_future(service.call_async(request), 10, "ProjectPoints reply")

    for asked in (seen, seen + 0.05):  # exactly a frame's stamp, and between it and the next frame
        reply = at(asked)
        assert reply.success and reply.targets[0].valid, reply.message
        assert conversions.stamp_to_seconds(reply.targets[0].header.stamp) == pytest.approx(seen, abs=1e-6)
    old = at(seen - 3600.0)
    assert not old.success and "near t=" in old.message


def test_unknown_target_frame_is_refused(client):
    _, service = client
    reply = call(service, [anchor(0, 100.0, 100.0)], target_frame="world", wait_for_frames=False)
    assert not reply.success
    assert "unknown target frame" in reply.message


def test_markers_drawn_for_targets(scene, client):
    spun, service = client
    got: list[MarkerArray] = []
    lock = threading.Lock()

    def on_markers(msg: MarkerArray) -> None:
        with lock:
            got.append(msg)

    spun.node.create_subscription(MarkerArray, "/robopin/targets/markers", on_markers, 10)
    time.sleep(1.0)  # discovery of the new subscription
    _, u, v, _ = scene["views"][0]["points"][0]
    reply = call(service, [anchor(0, u, v, "obj_01", "cube")])
    assert reply.targets[0].valid
    wait_for(lambda: any(len(m.markers) > 1 for m in got), 10, "a MarkerArray with target markers")
    with lock:
        markers = next(m for m in got if len(m.markers) > 1).markers
    assert markers[0].action == Marker.DELETEALL
    spheres = [m for m in markers if m.type == Marker.SPHERE]
    assert len(spheres) == 1
    assert spheres[0].header.frame_id == "base"
    assert "obj_01" in next(m.text for m in markers if m.type == Marker.TEXT_VIEW_FACING)


def test_wrist_view_through_joint_states_and_forward_kinematics(scene, client, tmp_path):
    """A second node that knows the arm only from /joint_states (Panda FK), on its own service name."""
    spun, _ = client
    process = start_projection_node(
        scene,
        tmp_path,
        {"robot_description": "panda", "ee_pose_topic": "/unused/ee_pose"},
        remaps=("/robopin/project_points:=/fk_test/project_points",),
    )
    try:
        service = spun.node.create_client(ProjectPoints, "/fk_test/project_points")
        assert service.wait_for_service(timeout_sec=30), "second projection_node not discovered"
        anchors, truths = ground_truth_anchors(scene)
        reply = call(service, anchors)
        assert reply.success, reply.message
        for target, truth in zip(reply.targets, truths, strict=True):
            assert target.valid, (target.id, target.reason)
            assert np.linalg.norm(conversions.point_to_vector(target.point) - truth) < 0.005
    finally:
        code, output = stop_process(process)
    assert code == 0, output


def _static_cloud_node(scene, spun, folder, prefix: str, cloud_period_s: float) -> tuple:
    """A projection node of its own whose cloud (the static view's) and service live under ``prefix``; the clouds
    it publishes are collected in the returned list."""
    clouds: list[PointCloud2] = []
    spun.node.create_subscription(PointCloud2, f"{prefix}/workspace_cloud", clouds.append, 2)
    process = start_projection_node(
        scene, folder, {"cloud_period_s": cloud_period_s, "cloud_views": ["static_cam"]},
        remaps=(f"/robopin/workspace_cloud:={prefix}/workspace_cloud",
                f"/robopin/project_points:={prefix}/project_points"),
    )
    return process, clouds


def test_workspace_cloud_from_the_chosen_views_covers_the_objects(scene, client, tmp_path):
    """cloud_views limits the obstacle cloud to the static view; its points are where the objects are."""
    spun, _ = client
    process, clouds = _static_cloud_node(scene, spun, tmp_path, "/cloud_test", cloud_period_s=0.3)
    try:
        wait_for(lambda: len(clouds) > 0, 30, "a workspace cloud")
        msg = clouds[-1]
        points = conversions.point_cloud_msg_to_points(msg)
    finally:
        code, output = stop_process(process)
    assert code == 0, output
    assert msg.header.frame_id == "base"
    assert np.all(points >= np.array([0.1, -0.5, -0.02]) - 1e-6) and np.all(points <= np.array([0.9, 0.5, 0.6]) + 1e-6)
    for _obj_name, _u, _v, truth in scene["views"][0]["points"]:
        assert np.min(np.linalg.norm(points - truth, axis=1)) < 0.015, truth


def test_a_request_on_new_frames_sends_their_cloud_without_waiting_for_the_period(scene, client, tmp_path):
    """The motion planner plans against a cloud taken after the arm came to rest; the frames a task has just projected
    on are such frames, so their cloud goes out with the request (the period here: 10 minutes)."""
    spun, _ = client
    process, clouds = _static_cloud_node(scene, spun, tmp_path, "/cloud_now", cloud_period_s=600.0)
    try:
        service = spun.node.create_client(ProjectPoints, "/cloud_now/project_points")
        assert service.wait_for_service(timeout_sec=30), "ProjectPoints service not discovered"
        anchors, _ = ground_truth_anchors(scene)
        reply = call(service, anchors[:1])
        assert reply.success and reply.targets[0].valid, reply.message
        wait_for(lambda: len(clouds) > 0, 30, "a workspace cloud after the request")
        cloud_stamp = conversions.stamp_to_seconds(clouds[-1].header.stamp)
        frame_stamp = conversions.stamp_to_seconds(reply.targets[0].header.stamp)
    finally:
        code, output = stop_process(process)
    assert code == 0, output
    assert cloud_stamp >= frame_stamp, (cloud_stamp, frame_stamp)


def test_cloud_views_must_be_configured_views(scene, tmp_path):
    process = start_projection_node(scene, tmp_path, {"cloud_period_s": 0.3, "cloud_views": ["ceiling"]})
    try:
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            stop_process(process)
    assert process.returncode != 0 and "cloud_views" in output, output


@pytest.fixture
def lossy_stream(ros_context, scene, tmp_path):
    """A projection node of its own (cameras under /lostcams, arm pose on /lost/ee_pose, stamp_tolerance_s 0.3 s)
    and a publisher of single frames and poses at chosen stamps: a frame the test never publishes is one this
    node never received (its subscription starved while the task node's got it). Yields (spun, send, call_at)."""
    process = start_projection_node(
        scene, tmp_path, {"camera_prefix": "/lostcams", "ee_pose_topic": "/lost/ee_pose", "stamp_tolerance_s": 0.3},
        remaps=("/robopin/project_points:=/lost/project_points",))
    spun = SpunNode("lossy_stream_client", ros_context)
    node = spun.node
    pubs = {i: (node.create_publisher(Image, f"/lostcams/{scene['views'][i]['name']}/aligned_depth_to_color/image_raw",
                                      10),
                node.create_publisher(CameraInfo, f"/lostcams/{scene['views'][i]['name']}/color/camera_info", 10))
            for i in (0, 1)}
    pose_pub = node.create_publisher(PoseStamped, "/lost/ee_pose", 50)
    service = node.create_client(ProjectPoints, "/lost/project_points")
    try:
        assert service.wait_for_service(timeout_sec=30), "ProjectPoints service not discovered"
        publishers = [pose_pub, *(p for pair in pubs.values() for p in pair)]
        wait_for(lambda: all(p.get_subscription_count() > 0 for p in publishers), 30, "the node's subscriptions")

        def send(frames: list[tuple[int, float]], poses: list[tuple[float, np.ndarray]]) -> None:
            for stamp, T_base_ee in poses:
                pose_pub.publish(PoseStamped(header=conversions.make_header(stamp, "base"),
                                             pose=conversions.matrix_to_pose(T_base_ee)))
                time.sleep(0.005)
            for img_idx, stamp in frames:
                view = scene["views"][img_idx]
                header = conversions.make_header(stamp, f"{view['name']}_optical")
                pubs[img_idx][0].publish(conversions.depth_to_image_msg(view["depth_m"], header))
                pubs[img_idx][1].publish(conversions.camera_model_to_camera_info(view["camera"], header))
                time.sleep(0.05)
            time.sleep(1.0)  # delivered before the request

        def call_at(stamp: float) -> ProjectPoints.Response:
            _, u, v, _ = scene["views"][1]["points"][0]
            request = ProjectPoints.Request(anchors=[anchor(1, u, v, "obj_01")],
                                            stamp=conversions.seconds_to_stamp(stamp))
            reply = ask(service, request, 10)
            assert reply is not None, "no ProjectPoints reply within 10 s"
            return reply

        yield spun, send, call_at
    finally:
        spun.close()
        code, output = stop_process(process)
        assert code == 0, output


def _still_poses(scene, start: float, end: float, moved_at: float | None = None) -> list[tuple[float, np.ndarray]]:
    """The arm's pose every 50 ms from start to end; from ``moved_at`` on, 5 mm further along x."""
    poses = []
    for k in range(round((end - start) / 0.05) + 1):
        stamp = start + 0.05 * k
        T = scene["T_base_ee"].copy()
        if moved_at is not None and stamp >= moved_at:
            T[0, 3] += 0.005
        poses.append((stamp, T))
    return poses


def test_a_wrist_frame_the_node_never_received_is_stood_in_for_by_the_next_while_the_arm_is_still(scene, lossy_stream):
    """The request's stamp (the static frame's, t0 + 0.5) had a wrist frame 0.1 s before it that never reached the
    node; the wrist frame 0.2 s after it, taken with the arm still, is projected instead and named in the reply."""
    _, send, call_at = lossy_stream
    t0 = time.time() - 30.0
    send([(1, t0), (0, t0 + 0.5), (1, t0 + 0.7)], _still_poses(scene, t0 - 0.1, t0 + 0.9))
    reply = call_at(t0 + 0.5)
    assert reply.success and reply.targets[0].valid, reply.message
    assert conversions.stamp_to_seconds(reply.targets[0].header.stamp) == pytest.approx(t0 + 0.7, abs=1e-6)
    assert "stands in for it (the arm was still)" in reply.message and f"t={t0 + 0.7:.3f} s" in reply.message
    truth = scene["views"][1]["points"][0][3]
    assert np.linalg.norm(conversions.point_to_vector(reply.targets[0].point) - truth) < 0.005


def test_a_lost_wrist_frame_is_refused_by_name_when_the_arm_moved_before_the_next(scene, lossy_stream):
    """As above, but the arm moved 5 mm between the request's stamp and the next wrist frame: no stand-in, and the
    refusal says which frame never came and why the next one cannot stand in for it."""
    _, send, call_at = lossy_stream
    t0 = time.time() - 20.0
    send([(1, t0), (0, t0 + 0.5), (1, t0 + 0.7)], _still_poses(scene, t0 - 0.1, t0 + 0.9, moved_at=t0 + 0.6))
    reply = call_at(t0 + 0.5)
    target = reply.targets[0]
    assert not target.valid and target.reason == "unknown_view", reply.message
    assert "never reached this node" in target.detail and "the arm moved 5.0 mm" in target.detail, target.detail


def test_a_still_simulated_cells_lost_frame_comes_again_with_its_stamp_and_one_frame_per_stamp_is_kept(
        scene, lossy_stream):
    """A simulated system runs on the simulator's clock (/clock, use_sim_time), which stands still while the cell
    does: every frame rendered meanwhile carries that one time. A wrist frame this node never received (a loaded
    machine's first task) comes again with the same stamp at the camera's next render, and is the view's frame for
    the request; however many renders of the still cell arrive, the node keeps one frame per stamp."""
    _, send, call_at = lossy_stream
    wrist = scene["views"][1]["name"]
    still = 7.25  # the simulator's time while the cell stands still (a few seconds after its layout settled)
    send([(0, still)], _still_poses(scene, still, still))  # the wrist frame of this instant was lost
    target = call_at(still).targets[0]
    assert not target.valid and "never reached this node (it holds none)" in target.detail, target.detail
    send([(1, still)] * 4, _still_poses(scene, still, still))  # the still cell, rendered again four times
    reply = call_at(still)
    assert reply.success and reply.targets[0].valid, reply.message
    assert conversions.stamp_to_seconds(reply.targets[0].header.stamp) == pytest.approx(still, abs=1e-6)
    truth = scene["views"][1]["points"][0][3]
    assert np.linalg.norm(conversions.point_to_vector(reply.targets[0].point) - truth) < 0.005
    reply = call_at(still - 1.0)  # before the cell's time: the refusal says what the view holds
    assert f"view '{wrist}': its frame" in reply.message, reply.message
    assert f"it holds 1 from t={still:.3f} to t={still:.3f} s" in reply.message, reply.message
