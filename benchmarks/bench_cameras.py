"""Camera pipeline benchmark: two 640x480 color+depth views at 30 Hz, from capture to snapshot in another process.

Two camera_node processes (view "static" plays a rosbag2 bag through the bag backend, view "wrist" a
RealSense recording through librealsense) publish over DDS; this process subscribes, converts, feeds
the SnapshotSynchronizer and takes snapshots at 30 Hz. Figures: delivered rate per view, drops (gaps
in the frame counter each synthetic frame carries in pixel (0, 0), less restart_skips: the recording's
first frames that librealsense's repeat playback skips when it loops; camera_drops: those the backend
itself saw, from camera_node's diagnostics), capture→snapshot-ready latency
p50/p95 (and p50 of capture→subscriber callback, before message conversion), snapshot success rate.
Baseline, same run: the same two cameras read in this process (``async_read``, no DDS, no conversion).
Goal: 30 Hz per view, no drops, p95 < 10 ms.

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
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402

from robopin.cameras import Frame, SnapshotConfig, SnapshotError, SnapshotSynchronizer, make_camera  # noqa: E402
from robopin.cameras.bag import write_camera_bag  # noqa: E402
from robopin.cameras.synthetic import SyntheticScene, write_realsense_recording  # noqa: E402
from robopin.geometry.camera_model import CameraModel  # noqa: E402
from robopin.stats import summarize  # noqa: E402

MODEL = CameraModel.from_fov(640, 480, np.deg2rad(42.5))
VIEWS = ("static", "wrist")
FPS = 30
LOOP_FRAMES = 60  # length of both recordings; they loop


def make_sources(root: Path, wrist_depth_offset_m: float) -> dict[str, dict]:
    """Write the two recordings and return the camera configs that play them (as node parameters).

    The wrist recording's depth imager sits ``wrist_depth_offset_m`` beside its color imager (a D435's
    is 15 mm): then librealsense really aligns depth to color; at 0 (a D405) alignment is the identity
    and the RealSense backend skips it.
    """
    scene = SyntheticScene(1.0, 0.2)
    depth = scene.depth_m(MODEL)
    frames = (Frame(scene.color(MODEL, i), depth, MODEL, 1000.0 + i / FPS, "", i, "static") for i in range(LOOP_FRAMES))
    bag = write_camera_bag(root / "static_bag", frames, topic_prefix="/cameras/static")
    T_color_depth = np.eye(4)
    T_color_depth[0, 3] = wrist_depth_offset_m
    recording = write_realsense_recording(root / "wrist.db3", MODEL, LOOP_FRAMES, scene=scene, fps=FPS, paced=True,
                                          T_color_depth=T_color_depth)
    return {
        "static": {"type": "bag", "name": "static", "bag_path": str(bag), "loop": True},
        "wrist": {"type": "realsense", "name": "wrist", "playback_file": str(recording), "repeat_playback": True},
    }


def count_drops(markers: list[int], loop_length: int = LOOP_FRAMES) -> tuple[int, int]:
    """(frames missing between consecutive received ones, of those: the recording's first frames at a restart).

    Pixel (0, 0)'s red channel carries the frame's number in its recording. Recordings loop every
    ``loop_length`` frames, so counting is modulo that length; a gap of a whole loop or more cannot be
    told apart from none (the rates show it). librealsense's repeat playback itself skips the
    recording's first frame(s) when it starts it again (59 → 1: the in-process baseline, which has no
    DDS, sees it as often), so a gap that wraps from the end of the recording and ends among its first
    frames counts those first frames apart as restart skips: the source's loss, not the pipeline's. (A
    pipeline drop of exactly those frames would be counted there too; the baseline's count shows how
    many to expect.)
    """
    missing = restart = 0
    for previous, current in itertools.pairwise(markers):
        gap = max(0, (current - previous) % loop_length - 1)
        missing += gap
        if gap and current < previous:  # wrapped: frames 0 .. current - 1 are the restart's
            restart += min(gap, current)
    return missing, restart


def load_average() -> float:
    return os.getloadavg()[0]


def minor_faults(pid: int) -> float:
    """Minor page faults of a process so far (Linux /proc; NaN elsewhere): fresh memory the kernel zero-filled."""
    try:
        return float(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])
    except (OSError, IndexError, ValueError):
        return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Collector:
    """Per-view arrivals and per-stage latencies, plus periodic snapshots."""

    def __init__(self) -> None:
        self.synchronizer = SnapshotSynchronizer(SnapshotConfig(views=VIEWS, sync_tolerance_s=0.02, max_age_s=0.5))
        self.lock = threading.Lock()
        self.arrivals: dict[str, list[float]] = {v: [] for v in VIEWS}
        self.latencies: dict[str, list[float]] = {v: [] for v in VIEWS}
        self.to_callback: dict[str, list[float]] = {v: [] for v in VIEWS}
        self.callback_to_ready: dict[str, list[float]] = {v: [] for v in VIEWS}
        self.markers: dict[str, list[int]] = {v: [] for v in VIEWS}
        self.node_stats: dict[str, dict[str, str]] = {}
        # dropped_frames (frame-number gaps the backend saw) as first and last reported in the window
        self.node_drops: dict[str, list[int]] = {}
        self.snapshots_ok = 0
        self.refusals: dict[str, int] = {}
        self.recording = False
        self.load = (float("nan"), float("nan"))
        self.cpu_percent: dict[str, float] = {}
        self.run_queue_wait_ms_per_s: dict[str, float] = {}
        self.page_faults_per_s: dict[str, float] = {}
        self.align_on_demand_ms: dict[str, float] = {}

    def on_frame(self, view: str, frame: Frame, received_s: float) -> None:
        ready_s = time.time()
        if not self.recording:
            return
        with self.lock:
            self.arrivals[view].append(time.monotonic())
            self.latencies[view].append(ready_s - frame.timestamp_s)
            self.to_callback[view].append(received_s - frame.timestamp_s)
            self.callback_to_ready[view].append(ready_s - received_s)
            self.markers[view].append(int(frame.color[0, 0, 0]))

    def on_diagnostics(self, msg: DiagnosticArray) -> None:
        """Keep each camera_node's latest self-reported figures (capture→publish over its last 300 frames)."""
        for status in msg.status:
            if status.name.startswith("camera_node: "):
                view = status.name.removeprefix("camera_node: ")
                self.node_stats[view] = {kv.key: kv.value for kv in status.values}
                if self.recording or view in self.node_drops:
                    drops = int(self.node_stats[view].get("dropped_frames", "0"))
                    self.node_drops.setdefault(view, [drops, drops])[1] = drops

    def take_snapshot(self) -> None:
        try:
            self.synchronizer.snapshot()
        except SnapshotError as error:
            self.refusals[error.reason] = self.refusals.get(error.reason, 0) + 1
        else:
            self.snapshots_ok += 1

    def report(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        missing = {view: count_drops(self.markers[view]) for view in VIEWS}
        for view in VIEWS:
            arrivals = self.arrivals[view]
            rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
            node = self.node_stats.get(view, {})
            out[view] = {
                "rate_hz": rate,
                "frames": float(len(arrivals)),
                "drops": float(missing[view][0] - missing[view][1]),
                "restart_skips": float(missing[view][1]),
                "camera_drops": float(np.subtract(*self.node_drops[view][::-1])) if view in self.node_drops
                else float("nan"),
                "p50_ms": summarize(self.latencies[view]).scaled(1e3).median,
                "p95_ms": summarize(self.latencies[view]).scaled(1e3).p95,
                "capture_to_publish_p50_ms": float(node.get("capture_to_publish_p50_ms", "nan")),
                "capture_to_publish_p95_ms": float(node.get("capture_to_publish_p95_ms", "nan")),
                "capture_to_read_p50_ms": float(node.get("capture_to_read_p50_ms", "nan")),
                "capture_to_read_p95_ms": float(node.get("capture_to_read_p95_ms", "nan")),
                "read_to_messages_p50_ms": float(node.get("read_to_messages_p50_ms", "nan")),
                "read_to_messages_p95_ms": float(node.get("read_to_messages_p95_ms", "nan")),
                "messages_to_published_p50_ms": float(node.get("messages_to_published_p50_ms", "nan")),
                "messages_to_published_p95_ms": float(node.get("messages_to_published_p95_ms", "nan")),
                "capture_to_callback_p50_ms": summarize(self.to_callback[view]).scaled(1e3).median,
                "capture_to_callback_p95_ms": summarize(self.to_callback[view]).scaled(1e3).p95,
                "callback_to_ready_p50_ms": summarize(self.callback_to_ready[view]).scaled(1e3).median,
                "callback_to_ready_p95_ms": summarize(self.callback_to_ready[view]).scaled(1e3).p95,
            }
        total = self.snapshots_ok + sum(self.refusals.values())
        out["snapshot"] = {"ok_fraction": self.snapshots_ok / total if total else 0.0, "taken": float(total)}
        out["load"] = {"start": self.load[0], "end": self.load[1]}
        out["cpu_percent"] = dict(self.cpu_percent)
        out["run_queue_wait_ms_per_s"] = dict(self.run_queue_wait_ms_per_s)
        out["page_faults_per_s"] = dict(self.page_faults_per_s)
        out["align_on_demand_ms"] = dict(self.align_on_demand_ms)
        return out


def run_queue_wait_s(pid: int) -> float:
    """Seconds the threads of a process have spent runnable but waiting for a CPU (Linux schedstat; NaN elsewhere).

    Latency on a shared machine is mostly this: a frame is ready, but its thread waits behind other work.
    """
    total = 0.0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return float("nan")
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total


def run_snapshots(collector: Collector, seconds: float, pids: dict[str, int] | None = None) -> None:
    """Take snapshots at FPS for ``seconds`` while recording; measure the CPU share of ``pids`` meanwhile."""
    pids = {"bench process (subscriber)": os.getpid(), **(pids or {})}
    start_load = load_average()
    start_cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    start_wait = {name: run_queue_wait_s(pid) for name, pid in pids.items()}
    start_faults = {name: minor_faults(pid) for name, pid in pids.items()}
    started = time.monotonic()
    collector.recording = True
    deadline = started + seconds
    next_tick = started
    while time.monotonic() < deadline:
        collector.take_snapshot()
        next_tick += 1.0 / FPS
        time.sleep(max(0.0, next_tick - time.monotonic()))
    collector.recording = False
    elapsed = time.monotonic() - started
    collector.cpu_percent = {name: 100.0 * (cpu_seconds(pid) - start_cpu[name]) / elapsed
                             for name, pid in pids.items()}
    collector.run_queue_wait_ms_per_s = {name: 1000.0 * (run_queue_wait_s(pid) - start_wait[name]) / elapsed
                                         for name, pid in pids.items()}
    collector.page_faults_per_s = {name: (minor_faults(pid) - start_faults[name]) / elapsed
                                   for name, pid in pids.items()}
    collector.load = (start_load, load_average())


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
            received_s = time.time()
            collector.synchronizer.add(view, frame)
            collector.on_frame(view, frame, received_s)

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


def start_camera_nodes(configs: dict[str, dict]) -> list[subprocess.Popen]:
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
    return processes


def over_dds(configs: dict[str, dict], seconds: float, executor_kind: str,
             own_executor: bool = False, unaligned: dict[str, np.ndarray] | None = None) -> dict[str, dict[str, float]]:
    """Two camera_node processes → DDS → CameraViewsSubscriber in this process.

    ``unaligned``: view → T_color_depth of views whose camera_node leaves depth unaligned; then the cost
    of aligning one received frame on demand (what projection does for the frame a request uses) is
    measured too.
    """
    from robopin_ros.camera_snapshot import CameraViewsSubscriber

    processes = start_camera_nodes(configs)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Node("bench_cameras", context=context)
    collector = Collector()
    subscriber = CameraViewsSubscriber(node, collector.synchronizer.config, on_frame=collector.on_frame,
                                       own_executor=own_executor, unaligned_depth=unaligned)
    collector.synchronizer = subscriber.synchronizer
    node.create_subscription(DiagnosticArray, "/diagnostics", collector.on_diagnostics, 10)
    if executor_kind == "single":
        executor = SingleThreadedExecutor(context=context)
    else:
        executor = MultiThreadedExecutor(num_threads=2, context=context)
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
        run_snapshots(collector, seconds, {f"camera_node {v}": p.pid for v, p in zip(VIEWS, processes, strict=True)})
        time.sleep(1.2)  # one more diagnostics message: the node's window then covers the measurement
        if unaligned:
            snap = collector.synchronizer.snapshot()  # the cameras still stream
            for view in unaligned:
                frame = snap.frames[view]
                frame.aligned_depth_m()  # first call builds the cached rays
                costs = []
                for _ in range(20):
                    started = time.perf_counter()
                    frame.aligned_depth_m()
                    costs.append(time.perf_counter() - started)
                collector.align_on_demand_ms[view] = summarize(costs).median * 1000.0
    finally:
        subscriber.close()
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    return collector.report()


FIGURES = (("rate_hz", "Hz"), ("frames", ""), ("drops", ""), ("restart_skips", ""), ("camera_drops", ""),
           ("p50_ms", "ms"), ("p95_ms", "ms"),
           ("capture_to_publish_p50_ms", "ms"), ("capture_to_publish_p95_ms", "ms"),
           ("capture_to_read_p50_ms", "ms"), ("capture_to_read_p95_ms", "ms"),
           ("read_to_messages_p50_ms", "ms"), ("read_to_messages_p95_ms", "ms"),
           ("messages_to_published_p50_ms", "ms"), ("messages_to_published_p95_ms", "ms"),
           ("capture_to_callback_p50_ms", "ms"), ("capture_to_callback_p95_ms", "ms"),
           ("callback_to_ready_p50_ms", "ms"), ("callback_to_ready_p95_ms", "ms"))


def print_comparison(title: str, dds: dict[str, dict[str, float]], baseline: dict[str, dict[str, float]]) -> None:
    print(f"\n{title}: load average {dds['load']['start']:.1f} → {dds['load']['end']:.1f} on {os.cpu_count()} CPUs "
          f"(baseline phase {baseline['load']['start']:.1f} → {baseline['load']['end']:.1f})")
    print(f"{'figure':<38}{'camera_node→DDS→snapshot':>26}{'in-process baseline':>22}{'ratio':>8}")
    for view in VIEWS:
        for key, unit in FIGURES:
            a, b = dds[view][key], baseline[view][key]
            ratio = a / b if b and np.isfinite(b) else float("nan")
            shown_b = f"{b:>19.2f} {unit:<2}" if np.isfinite(b) else f"{'-':>19} {unit:<2}"
            print(f"{view + ' ' + key:<38}{a:>23.2f} {unit:<2}{shown_b}{ratio:>8.2f}")
        publish_to_callback = dds[view]["capture_to_callback_p50_ms"] - dds[view]["capture_to_publish_p50_ms"]
        print(f"{view + ' publish_to_callback_p50_ms (diff)':<38}{publish_to_callback:>23.2f} ms")
    a, b = dds["snapshot"]["ok_fraction"], baseline["snapshot"]["ok_fraction"]
    print(f"{'snapshot ok fraction (30 Hz)':<38}{a:>23.3f}   {b:>19.3f}   {a / b if b else float('nan'):>8.2f}")
    for name, percent in dds["cpu_percent"].items():
        other = baseline["cpu_percent"].get(name, float("nan"))
        shown = f"{other:>19.1f} %" if np.isfinite(other) else f"{'-':>19}  "
        print(f"{'CPU ' + name:<38}{percent:>23.1f} % {shown}")
    for name, wait_ms in dds["run_queue_wait_ms_per_s"].items():
        other = baseline["run_queue_wait_ms_per_s"].get(name, float("nan"))
        shown = f"{other:>19.1f}" if np.isfinite(other) else f"{'-':>19}"
        print(f"{'waiting for a CPU ms/s ' + name:<38}{wait_ms:>23.1f}   {shown}")
    for name, faults in dds["page_faults_per_s"].items():
        other = baseline["page_faults_per_s"].get(name, float("nan"))
        shown = f"{other:>19.0f}" if np.isfinite(other) else f"{'-':>19}"
        print(f"{'minor page faults/s ' + name:<38}{faults:>23.0f}   {shown}")
    for view, cost in dds.get("align_on_demand_ms", {}).items():
        print(f"{view + ' align one frame on demand (median)':<38}{cost:>23.2f} ms")


def meets_goal(result: dict[str, dict[str, float]]) -> bool:
    return all(result[v]["rate_hz"] >= 29.5 and result[v]["drops"] == 0 and result[v]["p95_ms"] < 10.0
               for v in VIEWS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window per phase")
    parser.add_argument("--repeat", type=int, default=1, help="DDS phases to run (each with its load average)")
    parser.add_argument("--executor", choices=("single", "multi"), default="single",
                        help="the subscriber's rclpy executor (multi: MultiThreadedExecutor with 2 threads)")
    parser.add_argument("--own-executor", action="store_true",
                        help="CameraViewsSubscriber(own_executor=True): image callbacks on a SingleThreadedExecutor "
                             "thread of their own, whatever --executor spins the bench node")
    parser.add_argument("--wrist-depth-offset-mm", type=float, default=15.0,
                        help="wrist depth imager offset from color: 15 = D435-like (aligned by librealsense), "
                             "0 = D405-like (alignment is the identity and skipped)")
    parser.add_argument("--wrist-unaligned", action="store_true",
                        help="wrist camera_node with align_depth:=false: depth published in the depth imager's "
                             "frame (depth/image_rect_raw), aligned only on demand by the consumer")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cameras-") as tmp:
        started = time.monotonic()
        configs = make_sources(Path(tmp), args.wrist_depth_offset_mm / 1000.0)
        unaligned = None
        if args.wrist_unaligned:
            configs["wrist"]["align_depth"] = False
            T_color_depth = np.eye(4)
            T_color_depth[0, 3] = args.wrist_depth_offset_mm / 1000.0
            unaligned = {"wrist": T_color_depth}
        print(f"recordings written in {time.monotonic() - started:.1f} s (2 views, 640x480 color + depth, {FPS} Hz; "
              f"wrist depth imager {args.wrist_depth_offset_mm:g} mm from color"
              f"{'; wrist depth left unaligned' if args.wrist_unaligned else ''})")
        baseline = baseline_in_process(configs, args.seconds)
        runs = [over_dds(configs, args.seconds, args.executor, args.own_executor, unaligned)
                for _ in range(max(1, args.repeat))]
    executor = f"{args.executor} executor" + (", cameras on their own executor" if args.own_executor else "")
    if args.wrist_unaligned:
        executor += ", wrist depth unaligned"
    for number, run in enumerate(runs, 1):
        print_comparison(f"DDS run {number}/{len(runs)} ({executor})", run, baseline)
    print(f"\n{'run':<6}{'load':>12}" + "".join(f"{v + ' Hz/drops/p50/p95 ms':>34}" for v in VIEWS)
          + f"{'CPU % nodes+sub':>18}{'CPU-wait ms/s':>15}{'goal':>7}")
    for number, run in enumerate(runs, 1):
        cells = "".join(f"{run[v]['rate_hz']:>14.1f}{run[v]['drops']:>5.0f}{run[v]['p50_ms']:>7.1f}"
                        f"{run[v]['p95_ms']:>8.1f}" for v in VIEWS)
        cpu = sum(run["cpu_percent"].values())
        wait = sum(run["run_queue_wait_ms_per_s"].values())
        print(f"{number:<6}{run['load']['start']:>5.1f} → {run['load']['end']:<4.1f}{cells}{cpu:>18.0f}{wait:>15.0f}"
              f"{'met' if meets_goal(run) else 'no':>7}")
    print("\ngoal: 30 Hz per view, 0 drops, p95 < 10 ms capture→snapshot")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
