"""RealSense backend through the real librealsense: software-device frames and recordings made here."""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest

from robopin.cameras import CameraNotFoundError, CameraReadError, CameraTimeoutError, make_camera
from robopin.cameras.synthetic import SoftwareRealSense, SyntheticScene, write_realsense_recording
from robopin.geometry.camera_model import CameraModel

rs = pytest.importorskip("pyrealsense2", reason="pyrealsense2 (and Debian libusb-1.0-0) not installed")

from robopin.cameras.realsense import (  # noqa: E402 - after the importorskip
    RealSenseCamera,
    RealSenseCameraConfig,
    RealSenseFrameProcessor,
)

COLOR = CameraModel(80, 60, 60.0, 60.0, 39.5, 29.5)
DEPTH = CameraModel(64, 48, 56.0, 56.0, 31.5, 23.5)
SCENE = SyntheticScene(distance_m=0.8, slope_x=0.3)


def _T_color_depth(tx: float) -> np.ndarray:
    T = np.eye(4)
    T[0, 3] = tx
    return T


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("rs") / "two_models.db3"
    return write_realsense_recording(path, COLOR, 12, scene=SCENE, depth_model=DEPTH,
                                     T_color_depth=_T_color_depth(0.015), serial="SW4242")


@pytest.fixture(scope="module")
def paced_recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("rs") / "paced.db3"
    return write_realsense_recording(path, COLOR, 15, fps=30, paced=True)


def _assert_plane(depth_m: np.ndarray, tx: float = 0.015) -> None:
    """Aligned depth equals the plane seen from the color camera where depth covers the view."""
    truth = SCENE.depth_m(COLOR, _T_color_depth(tx))
    valid = np.isfinite(depth_m)
    error = np.abs(depth_m[valid] - truth[valid])
    # Nearest-pixel resampling on the 0.3 slope moves depth ~4.5 mm per color pixel; the median
    # stays within a few mm, while extrinsics read in the wrong direction put it ~9 mm off.
    assert np.median(error) < 0.003
    assert error.max() < 0.02


def _software_frameset(depth_raw: np.ndarray, tx: float = 0.015):
    device = SoftwareRealSense(COLOR, DEPTH, serial="SW1", T_color_depth=_T_color_depth(tx))
    syncer = rs.syncer()
    device.start(syncer)
    framesets = []
    for i in range(3):  # the matcher emits the first pair late; take the last complete one
        device.push(SCENE.color(COLOR, i), depth_raw, 1000.0 + i / 30)
        ok, fs = syncer.try_wait_for_frames(500)
        if ok and fs.size() == 2:
            framesets.append(fs)
    assert framesets, "librealsense matcher produced no depth+color pair"
    return device, framesets[-1]


def test_software_device_depth_is_aligned_to_color_in_metres():
    device, frameset = _software_frameset(SCENE.depth_mm_u16(DEPTH))
    color, depth_m, model, depth_model, _ = RealSenseFrameProcessor(RealSenseCameraConfig(width=80, height=60)).process(
        frameset
    )
    device.close()
    assert model == COLOR and depth_model is None
    assert depth_m.shape == color.shape[:2] == (60, 80)
    # The depth camera (64 px, f = 56) sees a narrower field than color (80 px, f = 60): the
    # uncovered border stays NaN.
    assert 0.5 < np.isfinite(depth_m).mean() < 1.0
    assert np.isnan(depth_m[:, 0]).all()
    _assert_plane(depth_m)


def test_identity_alignment_is_skipped_and_gives_what_rs_align_gives():
    # Depth and color with one model and identity extrinsics (a D405): rs.align would map each pixel
    # onto itself, so the processor skips it. Where rs.align gives depth the result must be the same;
    # rs.align also leaves rounding holes (zeros) an identity mapping has no reason to make.
    device = SoftwareRealSense(COLOR, COLOR, serial="SW2", T_color_depth=np.eye(4))
    syncer = rs.syncer()
    device.start(syncer)
    framesets = []
    for i in range(3):
        device.push(SCENE.color(COLOR, i), SCENE.depth_mm_u16(COLOR), 1000.0 + i / 30)
        ok, fs = syncer.try_wait_for_frames(500)
        if ok and fs.size() == 2:
            framesets.append(fs)
    assert framesets, "librealsense matcher produced no depth+color pair"
    frameset = framesets[-1]
    processor = RealSenseFrameProcessor(RealSenseCameraConfig(width=80, height=60))
    depth_m = processor.process(frameset).depth_m
    reference = np.asanyarray(rs.align(rs.stream.color).process(frameset).get_depth_frame().get_data())
    device.close()
    assert processor.alignments_skipped == 1
    aligned = reference > 0
    assert aligned.mean() > 0.5
    np.testing.assert_array_equal(depth_m[aligned],
                                  reference[aligned].astype(np.float32) * np.float32(device.depth_units_m))
    assert np.isfinite(depth_m).all()


def test_offset_depth_camera_is_aligned_not_skipped():
    device, frameset = _software_frameset(SCENE.depth_mm_u16(DEPTH))
    processor = RealSenseFrameProcessor(RealSenseCameraConfig(width=80, height=60))
    processor.process(frameset)
    device.close()
    assert processor.alignments_skipped == 0


def test_unaligned_depth_keeps_the_depth_imager_frame_and_aligns_on_demand_like_rs_align():
    # align_depth: false (realsense-ros without align_depth.enable): depth stays in the depth imager's
    # own image with its intrinsics and the depth -> color extrinsics; Frame.aligned_depth_m() then
    # registers it on demand and must agree with what rs.align makes of the same frameset.
    from robopin.cameras import Frame

    device, frameset = _software_frameset(SCENE.depth_mm_u16(DEPTH))
    processed = RealSenseFrameProcessor(RealSenseCameraConfig(width=80, height=60, align_depth=False)).process(
        frameset
    )
    reference = np.asanyarray(rs.align(rs.stream.color).process(frameset).get_depth_frame().get_data())
    units = device.depth_units_m
    device.close()
    assert processed.intrinsics == COLOR and processed.depth_intrinsics == DEPTH
    assert processed.depth_m.shape == (DEPTH.height, DEPTH.width)
    np.testing.assert_allclose(processed.depth_m, SCENE.depth_mm_u16(DEPTH).astype(np.float32) * np.float32(units))
    T = processed.T_color_depth
    np.testing.assert_allclose(T, _T_color_depth(0.015), atol=1e-6)
    frame = Frame(processed.color, processed.depth_m, processed.intrinsics, 1.0,
                  depth_intrinsics=processed.depth_intrinsics, T_color_depth=T)
    assert not frame.depth_aligned
    aligned = frame.aligned_depth_m()
    assert aligned.shape == (COLOR.height, COLOR.width)
    both = np.isfinite(aligned) & (reference > 0)
    assert both.mean() > 0.5
    # rs.align rounds differently at pixel borders; on this smooth scene values agree to a few mm.
    diff = np.abs(aligned[both] - reference[both].astype(np.float32) * np.float32(units))
    assert np.median(diff) < 0.002 and diff.max() < 0.02
    assert abs(np.isfinite(aligned).mean() - (reference > 0).mean()) < 0.1


def test_software_device_zero_depth_becomes_nan_and_hole_filling_fills_it():
    raw = SCENE.depth_mm_u16(DEPTH)
    raw[20:28, 28:36] = 0  # a hole in the middle, as glossy objects make
    hole = (slice(30, 34), slice(38, 42))  # color pixels well inside the hole
    device, frameset = _software_frameset(raw, tx=0.0)
    unfiltered = RealSenseFrameProcessor(RealSenseCameraConfig(width=80, height=60)).process(frameset).depth_m
    filled = RealSenseFrameProcessor(
        RealSenseCameraConfig(width=80, height=60, filters=("hole_filling",), hole_filling_mode=2)
    ).process(frameset).depth_m
    device.close()
    assert np.isnan(unfiltered[hole]).all()
    assert np.isfinite(filled[hole]).all()
    assert np.abs(filled[hole] - SCENE.depth_m(COLOR)[hole]).max() < 0.05


def test_depth_range_marks_far_pixels_invalid():
    device, frameset = _software_frameset(SCENE.depth_mm_u16(DEPTH))
    depth_m = RealSenseFrameProcessor(
        RealSenseCameraConfig(width=80, height=60, max_depth_m=0.8)
    ).process(frameset).depth_m
    device.close()
    finite = depth_m[np.isfinite(depth_m)]
    assert finite.size > 0 and finite.max() <= 0.8


def test_playback_of_a_recording_gives_frames_with_profile_intrinsics(recording):
    camera = make_camera({"type": "realsense", "name": "wrist", "width": 80, "height": 60,
                          "playback_file": str(recording), "playback_realtime": False})
    with camera:
        frames = [camera.read() for _ in range(5)]
    assert [f.index for f in frames] == [0, 1, 2, 3, 4]
    assert all(f.serial == "SW4242" and f.camera_name == "wrist" for f in frames)
    assert frames[0].intrinsics == COLOR
    reds = [int(f.color[0, 0, 0]) for f in frames]
    assert reds[0] <= 1 and reds == list(range(reds[0], reds[0] + 5))
    _assert_plane(frames[-1].depth_m)


def test_playback_end_is_a_read_error_and_reconnect_restarts(recording):
    camera = RealSenseCamera(RealSenseCameraConfig(width=80, height=60, playback_file=str(recording),
                                                   playback_realtime=False, read_timeout_s=2.0))
    camera.connect()
    reds = []
    with pytest.raises(CameraReadError, match="end of recording"):
        for _ in range(40):
            reds.append(int(camera.read().color[0, 0, 0]))
    # Frame-by-frame playback delivers every recorded frame in order, except that the pipeline's
    # depth/color matcher sometimes drops the very first pair.
    assert reds[0] <= 1 and reds == list(range(reds[0], 12))
    camera.disconnect()
    camera.connect()
    assert int(camera.read().color[0, 0, 0]) <= 1
    camera.disconnect()


def test_playback_async_read_in_real_time(paced_recording):
    camera = RealSenseCamera(RealSenseCameraConfig(width=80, height=60, playback_file=str(paced_recording)))
    with camera:
        frames = [camera.async_read(timeout_s=1.0) for _ in range(4)]
    assert len({f.index for f in frames}) == 4
    # Playback is restamped on the host clock, so it looks like a live camera to the snapshot.
    assert all(abs(f.timestamp_s - time.time()) < 5.0 for f in frames)


def test_real_time_playback_is_stamped_when_played_not_when_picked_up():
    # Playback releases frames at recorded stamp + a fixed offset; a frame picked up late (the reader was
    # busy) keeps the time it was played, so its wait counts as latency. A repeat from the start of the
    # recording (stamps jump back) takes a new offset.
    camera = RealSenseCamera(RealSenseCameraConfig(width=80, height=60, playback_file="unused.db3"))
    assert camera._played_at_s(100.0, 5000.010) == pytest.approx(5000.010)
    assert camera._played_at_s(100.1, 5000.125) == pytest.approx(5000.110)  # picked up 15 ms late
    assert camera._played_at_s(100.2, 5000.205) == pytest.approx(5000.205)  # less delayed: new offset
    assert camera._played_at_s(100.3, 5000.330) == pytest.approx(5000.305)
    assert camera._played_at_s(100.0, 5000.500) == pytest.approx(5000.500)  # the recording repeats


def test_recording_with_other_serial_is_refused(recording):
    camera = RealSenseCamera(RealSenseCameraConfig(serial="999", width=80, height=60,
                                                   playback_file=str(recording)))
    with pytest.raises(CameraNotFoundError, match="SW4242"):
        camera.connect()


def test_missing_recording_is_refused(tmp_path):
    with pytest.raises(CameraNotFoundError, match="does not exist"):
        RealSenseCamera(RealSenseCameraConfig(playback_file=str(tmp_path / "none.db3"))).connect()


@pytest.mark.timeout(10)
def test_absent_serial_fails_at_once_instead_of_blocking_in_pipeline_start():
    # query_devices() is checked first; pipeline.start() would block ~15 s without a camera.
    serials = [d.get_info(rs.camera_info.serial_number) for d in rs.context().query_devices()]
    absent = "0000" + "".join(serials)
    with pytest.raises(CameraNotFoundError, match=f"'{absent}'"):
        RealSenseCamera(RealSenseCameraConfig(serial=absent)).connect()


def test_config_rejects_unknown_filter():
    with pytest.raises(ValueError, match="'median'"):
        RealSenseCameraConfig(filters=("spatial", "median"))


class _Producer:
    """Pushes software-device frames at 30 Hz from a thread, like a camera's USB stream."""

    def __init__(self, device: SoftwareRealSense) -> None:
        self.device = device
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        color, depth = SCENE.color(COLOR, 0), SCENE.depth_mm_u16(DEPTH)
        while not self._stop.wait(1 / 30):
            # RuntimeError: the camera is restarting the sensors this instant.
            with contextlib.suppress(RuntimeError):
                self.device.push(color, depth)

    def __enter__(self) -> _Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2.0)


def _next_frame(camera, after_index: int, limit_s: float):
    """The first frame with an index above ``after_index`` from the reader thread, within ``limit_s``."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            frame = camera.async_read(timeout_s=0.5)
        except CameraTimeoutError:
            continue
        if frame.index > after_index:
            return frame
    return None


def _software_camera():
    device = SoftwareRealSense(COLOR, DEPTH, serial="SW9", T_color_depth=_T_color_depth(0.015))
    # The shipped recovery settings (stall_restart_s 2 s, hardware_reset_after 2).
    camera = RealSenseCamera(RealSenseCameraConfig(name="wrist", width=80, height=60), software_device=device)
    return device, camera


def test_a_stalled_software_device_pipeline_is_restarted_in_place():
    device, camera = _software_camera()
    with _Producer(device):
        camera.connect()
        try:
            first = _next_frame(camera, -1, 5.0)
            assert first is not None
            device.stall()  # the stream hangs until its sensors are started again
            stalled_at = time.monotonic()
            with pytest.raises(CameraTimeoutError):
                while True:  # drain what arrived before the stall; then nothing comes
                    camera.async_read(timeout_s=0.5)
            recovered = _next_frame(camera, first.index, 10.0)
            took = time.monotonic() - stalled_at
            assert recovered is not None, "no frame after the stall: the pipeline was not restarted"
            assert camera.is_connected and camera.pipeline_restarts == 1 and camera.hardware_resets == 0
            assert recovered.depth_m is not None and np.isfinite(recovered.depth_m).any()
            print(f"stalled pipeline back after {took:.2f} s (stall_restart_s 2.0)")
        finally:
            camera.disconnect()


def test_restarts_that_do_not_help_escalate_to_a_hardware_reset_and_the_camera_stays_up():
    device, camera = _software_camera()
    with _Producer(device):
        camera.connect()
        try:
            first = _next_frame(camera, -1, 5.0)
            device.stall("forever")  # no restart cures it
            end = time.monotonic() + 15.0
            while camera.hardware_resets == 0 and time.monotonic() < end:
                time.sleep(0.1)
            # librealsense refuses hardware_reset on a software device ("not implemented"): logged, not fatal.
            assert camera.hardware_resets == 1 and camera.pipeline_restarts == 3
            device.resume()
            assert _next_frame(camera, first.index, 10.0) is not None
            assert camera.is_connected
        finally:
            camera.disconnect()


def test_recovery_settings_are_checked():
    with pytest.raises(ValueError, match="stall_restart_s"):
        RealSenseCameraConfig(stall_restart_s=0.2, read_timeout_s=1.0)
    with pytest.raises(ValueError, match="hardware_reset_after"):
        RealSenseCameraConfig(hardware_reset_after=-1)
