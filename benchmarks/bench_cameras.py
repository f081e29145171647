"""Camera pipeline benchmark: two 640x480 color+depth views at 30 Hz, from capture to snapshot in another process.

Two camera_node processes (view "static" plays a rosbag2 bag through the bag backend, view "wrist" a
RealSense recording through librealsense) publish over DDS; this process subscribes, converts, feeds
the SnapshotSynchronizer and takes snapshots at 30 Hz. Figures: delivered rate per view, drops (gaps
in the frame counter each synthetic frame carries in pixel (0, 0)), capture→snapshot-ready latency
p50/p95 (and p50 of capture→subscriber callback, before message conversion), snapshot success rate.
Baseline, same run: the same two cameras read in this process (``async_read``, no DDS, no conversion).
Goal from the issue: 30 Hz per view, no drops, p95 < 10 ms.

Run: ``.venv/bin/python benchmarks/bench_cameras.py [--seconds 10]`` (about a minute).
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from robopin.env import apply_ros_environment

apply_ros_environment(domain_id=int(os.environ.get("ROS_DOMAIN_ID", "77")), localhost_only=True)

import rclpy  # noqa: E402 - after the ROS environment is set
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402

from robopin.cameras import Frame, SnapshotConfig, SnapshotError, SnapshotSynchronizer, make_camera  # noqa: E402
from robopin.cameras.bag import write_camera_bag  # noqa: E402
from robopin.cameras.synthetic import SyntheticScene, write_realsense_recording  # noqa: E402
from robopin.geometry.camera_model import CameraModel  # noqa: E402

MODEL = CameraModel.from_fov(640, 480, np.deg2rad(42.5))
VIEWS = ("static", "wrist")
FPS = 30
LOOP_FRAMES = 60  # length of both recordings; they loop


def make_sources(root: Path) -> dict[str, dict]:
    """Write the two recordings and return the camera configs that play them (as node parameters)."""
    scene = SyntheticScene(1.0, 0.2)
    depth = scene.depth_m(MODEL)
    frames = (Frame(scene.color(MODEL, i), depth, MODEL, 1000.0 + i / FPS, "", i, "static") for i in range(LOOP_FRAMES))
    bag = write_camera_bag(root / "static_bag", frames, topic_prefix="/cameras/static")
    recording = write_realsense_recording(root / "wrist.db3", MODEL, LOOP_FRAMES, scene=scene, fps=FPS, paced=True)
    return {
        "static": {"type": "bag", "name": "static", "bag_path": str(bag), "loop": True},
        "wrist": {"type": "realsense", "name": "wrist", "playback_file": str(recording), "repeat_playback": True},
    }


def percentile_ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q)) if values else float("nan")


def count_drops(markers: list[int], loop_length: int = LOOP_FRAMES) -> int:
    """Frames missing between consecutive received ones (pixel (0, 0) red = frame number).

    Recordings loop every ``loop_length`` frames, so counting is modulo that length; a gap of a whole
    loop or more cannot be told apart from none (the rates show it).
    """
    return sum(max(0, (current - previous) % loop_length - 1) for previous, current in itertools.pairwise(markers))


class Collector:
    """Per-view arrivals and latencies, plus periodic snapshots."""

    def __init__(self) -> None:
        self.synchronizer = SnapshotSynchronizer(SnapshotConfig(views=VIEWS, sync_tolerance_s=0.02, max_age_s=0.5))
        self.lock = threading.Lock()
        self.arrivals = {v: [] for v in VIEWS}
        self.latencies = {v: [] for v in VIEWS}
        self.transport = {v: [] for v in VIEWS}
        self.markers = {v: [] for v in VIEWS}
        self.snapshots_ok = 0
        self.refusals: dict[str, int] = {}
        self.recording = False

    def on_frame(self, view: str, frame: Frame, received_s: float) -> None:
        ready_s = time.time()
        if not self.recording:
            return
        with self.lock:
            self.arrivals[view].append(time.monotonic())
            self.latencies[view].append(ready_s - frame.timestamp_s)
            self.transport[view].append(received_s - frame.timestamp_s)
            self.markers[view].append(int(frame.color[0, 0, 0]))

    def take_snapshot(self) -> None:
        try:
            self.synchronizer.snapshot()
        except SnapshotError as error:
            self.refusals[error.reason] = self.refusals.get(error.reason, 0) + 1
        else:
            self.snapshots_ok += 1

    def report(self) -> dict[str, dict[str, float]]:
        out = {}
        for view in VIEWS:
            arrivals = self.arrivals[view]
            rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
            out[view] = {
                "rate_hz": rate,
                "frames": float(len(arrivals)),
                "drops": float(count_drops(self.markers[view])),
                "p50_ms": percentile_ms(self.latencies[view], 50),
                "p95_ms": percentile_ms(self.latencies[view], 95),
                "to_callback_p50_ms": percentile_ms(self.transport[view], 50),
            }
        total = self.snapshots_ok + sum(self.refusals.values())
        out["snapshot"] = {"ok_fraction": self.snapshots_ok / total if total else 0.0, "taken": float(total)}
        return out


def run_snapshots(collector: Collector, seconds: float) -> None:
    collector.recording = True
    deadline = time.monotonic() + seconds
    next_tick = time.monotonic()
    while time.monotonic() < deadline:
        collector.take_snapshot()
        next_tick += 1.0 / FPS
        time.sleep(max(0.0, next_tick - time.monotonic()))
    collector.recording = False


def baseline_in_process(configs: dict[str, dict], seconds: float) -> dict[str, dict[str, float]]:
    """The same cameras read here with async_read: no DDS, no message conversion."""
    collector = Collector()
    cameras = {v: make_camera({**configs[v], "width": 640, "height": 480}) for v in VIEWS}
    stop = threading.Event()

    def pump(view: str) -> None:
        camera = cameras[view]
        while not stop.is_set():
            try:
                frame = camera.async_read(timeout_s=0.5)
            except Exception:  # end of a loop iteration etc.: the benchmark only reports
                continue
            collector.synchronizer.add(view, frame)
            collector.on_frame(view, frame, time.time())

    for camera in cameras.values():
        camera.connect()
    threads = [threading.Thread(target=pump, args=(v,), daemon=True) for v in VIEWS]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # warm-up
    run_snapshots(collector, seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=2.0)
    for camera in cameras.values():
        camera.disconnect()
    return collector.report()


def over_dds(configs: dict[str, dict], seconds: float) -> dict[str, dict[str, float]]:
    """Two camera_node processes → DDS → CameraViewsSubscriber in this process."""
    from robopin_ros.camera_snapshot import CameraViewsSubscriber

    processes = []
    for view in VIEWS:
        config = dict(configs[view])
        args = [sys.executable, "-m", "robopin_ros.camera_node", "--ros-args", "-r", f"__node:=camera_{view}",
                "-p", f"name:={view}", "-p", f"backend:={config.pop('type')}", "-p", "width:=640",
                "-p", "height:=480", "-p", f"fps:={FPS}"]
        config.pop("name")
        for key in ("bag_path", "playback_file"):
            if key in config:
                args += ["-p", f"{key}:={config.pop(key)}"]
        options = "{" + ", ".join(f"{k}: {str(v).lower()}" for k, v in config.items()) + "}"
        args += ["-p", f"options:='{options}'"]
        processes.append(subprocess.Popen(args, env=dict(os.environ), stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
    rclpy.init()
    node = Node("bench_cameras")
    collector = Collector()
    subscriber = CameraViewsSubscriber(node, collector.synchronizer.config, on_frame=collector.on_frame)
    collector.synchronizer = subscriber.synchronizer
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            try:
                collector.synchronizer.snapshot()
                break
            except SnapshotError:
                time.sleep(0.1)
        time.sleep(1.0)  # warm-up
        run_snapshots(collector, seconds)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return collector.report()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window per phase")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cameras-") as tmp:
        started = time.monotonic()
        configs = make_sources(Path(tmp))
        print(f"recordings written in {time.monotonic() - started:.1f} s (2 views, 640x480 color + depth, {FPS} Hz)")
        baseline = baseline_in_process(configs, args.seconds)
        dds = over_dds(configs, args.seconds)
    print(f"\n{'figure':<34}{'camera_node→DDS→snapshot':>26}{'in-process baseline':>22}{'ratio':>8}")
    for view in VIEWS:
        for key, unit in (("rate_hz", "Hz"), ("frames", ""), ("drops", ""), ("p50_ms", "ms"), ("p95_ms", "ms"),
                          ("to_callback_p50_ms", "ms")):
            a, b = dds[view][key], baseline[view][key]
            ratio = a / b if b else float("nan")
            print(f"{view + ' ' + key:<34}{a:>23.2f} {unit:<2}{b:>19.2f} {unit:<2}{ratio:>8.2f}")
    a, b = dds["snapshot"]["ok_fraction"], baseline["snapshot"]["ok_fraction"]
    print(f"{'snapshot ok fraction (30 Hz)':<34}{a:>23.3f}   {b:>19.3f}   {a / b if b else float('nan'):>8.2f}")
    print("\ngoal (issue 6): 30 Hz per view, 0 drops, p95 < 10 ms capture→snapshot")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (latency needs idle cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
