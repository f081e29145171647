"""Trial-bag benchmark: recorder overhead per message, sustained rate of two camera pairs, replay timing error.

1. Overhead: the cost of ``TrialRecorder.record()`` on the subscriber's thread (enqueue of the raw
   bytes) for a 640x480 rgb8 image and a JointState, and the writer thread's time per message; the
   baseline is copying the same bytes (``bytes(data)``), the least any recorder must do.
2. Sustained rate: this process publishes two 640x480 camera pairs (color rgb8 + aligned depth 16UC1)
   at 30 Hz and then faster, a recorder_node process records them; a rate passes when every
   published image reaches the bag. Baseline: a raw subscriber in a second process that only counts.
3. Replay timing error: a 2 s bag of the two pairs at 30 Hz replayed at rate 1; lateness of each
   message against its due time. Baseline: the overshoot of ``time.sleep`` for the same periods.

Run: ``.venv/bin/python benchmarks/bench_bags.py`` (about a minute and a half).
"""

from __future__ import annotations

import argparse
import array
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from robopin.env import apply_ros_environment

apply_ros_environment(domain_id=int(os.environ.get("ROS_DOMAIN_ID", "78")), localhost_only=True)

import rclpy  # noqa: E402 - after the ROS environment is set
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from robopin.bags import ReplayOptions, TrialBag, TrialRecorder, replay  # noqa: E402
from robopin.bags.recorder import record_messages  # noqa: E402
from robopin.stats import summarize  # noqa: E402

WIDTH, HEIGHT = 640, 480
VIEWS = ("static", "wrist")
QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=30, reliability=ReliabilityPolicy.RELIABLE)

_COUNTER = """
import sys, time, rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from std_srvs.srv import Trigger
rclpy.init()
node = rclpy.create_node("bench_counter")
class Counter:
    def __init__(self):
        self.messages = 0
    def received(self, data):
        self.messages += 1
counter = Counter()
qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=30, reliability=ReliabilityPolicy.RELIABLE)
for view in ("static", "wrist"):
    for topic in (f"/cameras/{view}/color/image_raw", f"/cameras/{view}/aligned_depth_to_color/image_raw"):
        node.create_subscription(Image, topic, counter.received, qos, raw=True)
def report(request, response):
    response.success, response.message = True, f"{counter.messages} messages, 0 dropped"
    counter.messages = 0
    return response
node.create_service(Trigger, "/bench_counter/stop", report)
def reset(request, response):
    counter.messages, response.success = 0, True
    return response
node.create_service(Trigger, "/bench_counter/start", reset)
executor = SingleThreadedExecutor()
executor.add_node(node)
try:
    executor.spin()
except BaseException:
    pass
"""


def images(k: int) -> tuple[Image, Image]:
    color = Image(height=HEIGHT, width=WIDTH, encoding="rgb8", step=WIDTH * 3)
    color.data = array.array("B", np.full((HEIGHT, WIDTH, 3), k % 251, np.uint8).tobytes())
    depth = Image(height=HEIGHT, width=WIDTH, encoding="16UC1", step=WIDTH * 2)
    depth.data = array.array("B", np.full((HEIGHT, WIDTH), 800 + k % 100, np.uint16).tobytes())
    return color, depth


def overhead(repeats: int) -> dict[str, tuple[float, float]]:
    color, _ = images(0)
    color_bytes = serialize_message(color)
    joint_bytes = serialize_message(JointState(name=[f"j{i}" for i in range(7)], position=[0.1] * 7))
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        recorder = TrialRecorder(folder, queue_size=2 * repeats + 10)  # nothing dropped: every call is timed
        recorder.start("overhead")
        for label, data, msgtype, topic in (("image 640x480", color_bytes, "sensor_msgs/msg/Image", "/img"),
                                            ("joint state", joint_bytes, "sensor_msgs/msg/JointState", "/js")):
            started = time.perf_counter()
            for _ in range(repeats):
                recorder.record(topic, msgtype, data)
            record_us = (time.perf_counter() - started) / repeats * 1e6
            started = time.perf_counter()
            for _ in range(repeats):
                bytes(memoryview(data))
            copy_us = (time.perf_counter() - started) / repeats * 1e6
            figures[f"record() {label} [us]"] = (record_us, copy_us)
        stats = recorder.stop()
        per_message_us = stats.write_time_s / max(stats.total, 1) * 1e6
        figures["writer thread per message [us]"] = (per_message_us, figures["record() image 640x480 [us]"][1])
    return figures


def call(node: Node, executor: SingleThreadedExecutor, service: str, timeout_s: float = 20.0) -> str:
    client = node.create_client(Trigger, service)
    if not client.wait_for_service(timeout_sec=20.0):
        raise RuntimeError(f"service {service} did not appear")
    future = client.call_async(Trigger.Request())
    executor.spin_until_future_complete(future, timeout_sec=timeout_s)
    node.destroy_client(client)
    if future.result() is None:
        raise RuntimeError(f"{service} gave no answer within {timeout_s} s")
    return future.result().message


def sustained(rates_hz: list[float], seconds: float) -> list[tuple[float, int, int, int, int]]:
    """(rate, images published, recorded, dropped by the recorder's full queue, counted by a bare subscriber)."""
    rclpy.init()
    node = Node("bench_bag_publisher")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    publishers = [(node.create_publisher(Image, f"/cameras/{v}/color/image_raw", QOS),
                   node.create_publisher(Image, f"/cameras/{v}/aligned_depth_to_color/image_raw", QOS)) for v in VIEWS]
    folder = tempfile.mkdtemp(prefix="bench-bags-")
    recorder = subprocess.Popen(
        [sys.executable, "-m", "robopin_ros.recorder_node", "--ros-args", "-p", f"output_dir:={folder}",
         "-p", 'topics:=["/cameras/*/color/image_raw", "/cameras/*/aligned_depth_to_color/image_raw"]'],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counter = subprocess.Popen([sys.executable, "-c", _COUNTER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = []
    frames = [images(k) for k in range(4)]
    try:
        deadline = time.monotonic() + 30
        while any(p.get_subscription_count() < 2 for pair in publishers for p in pair):
            if time.monotonic() > deadline:
                raise RuntimeError("recorder_node and the counter did not subscribe within 30 s")
            executor.spin_once(timeout_sec=0.1)
        for rate in rates_hz:
            call(node, executor, "/recorder_node/start")
            call(node, executor, "/bench_counter/start")
            period = 1.0 / rate
            count = int(seconds * rate)
            start = time.perf_counter()
            for k in range(count):
                color, depth = frames[k % len(frames)]
                for color_pub, depth_pub in publishers:
                    color_pub.publish(color)
                    depth_pub.publish(depth)
                wait = start + (k + 1) * period - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            time.sleep(1.0)  # let the last frames arrive
            stopped = call(node, executor, "/recorder_node/stop", 90.0).split(": ")[-1]  # "N messages, M dropped"
            recorded, dropped = (int(part.split()[0]) for part in stopped.split(", "))
            counted = int(call(node, executor, "/bench_counter/stop").split(" messages")[0])
            results.append((rate, count * 4, recorded, dropped, counted))
    finally:
        for process in (recorder, counter):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        node.destroy_node()
        rclpy.shutdown()
    return results


def replay_timing() -> tuple[dict[str, float], dict[str, float]]:
    color, depth = images(0)
    color_bytes, depth_bytes = serialize_message(color), serialize_message(depth)
    messages = []
    for k in range(60):
        stamp = 10**9 + round(k * 1e9 / 30)
        for view in VIEWS:
            messages.append((f"/cameras/{view}/color/image_raw", "sensor_msgs/msg/Image", color_bytes, stamp))
            messages.append((f"/cameras/{view}/aligned_depth_to_color/image_raw", "sensor_msgs/msg/Image",
                             depth_bytes, stamp))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bag"
        record_messages(path, messages)
        with TrialBag(path) as bag:
            stats = replay(bag, lambda m: None, ReplayOptions(rate=1.0))
    overshoot = []
    for _ in range(60):
        started = time.perf_counter()
        time.sleep(1 / 30)
        overshoot.append(time.perf_counter() - started - 1 / 30)
    ms = summarize(overshoot).scaled(1e3)
    baseline = {"p50": ms.median, "p95": ms.p95, "max": ms.max}
    return stats.lateness_summary_ms(), baseline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="publishing time per rate")
    parser.add_argument("--rates", type=float, nargs="*", default=[15.0, 30.0, 45.0, 60.0])
    args = parser.parse_args()

    print(f"{'recorder overhead':<36}{'recorder':>12}{'bytes copy':>14}{'ratio':>8}")
    for label, (value, baseline) in overhead(300).items():
        print(f"{label:<36}{value:>12.1f}{baseline:>14.1f}{value / baseline:>8.1f}")

    print(f"\n{'two camera pairs (4 x 640x480)':<36}{'published':>10}{'recorded':>10}{'queue drop':>11}"
          f"{'counter':>9}{'lost':>6}{'rec/counter':>12}")
    best, lossless = 0.0, True
    for rate, published, recorded, dropped, counted in sustained(sorted(args.rates), args.seconds):
        lost = published - recorded
        lossless = lossless and lost == 0  # the highest rate below which nothing was lost
        if lossless:
            best = rate
        print(f"{f'{rate:.0f} Hz per stream':<36}{published:>10}{recorded:>10}{dropped:>11}{counted:>9}{lost:>6}"
              f"{recorded / counted if counted else float('nan'):>12.2f}")
    print(f"max sustained rate without loss: {best:.0f} Hz per stream ({best * 4:.0f} images/s, "
          f"{best * 4 * WIDTH * HEIGHT * 2.5 / 1e6:.0f} MB/s)")

    lateness, baseline = replay_timing()
    print(f"\n{'replay timing error [ms]':<36}{'replay':>10}{'sleep':>10}{'ratio':>8}")
    for key in ("p50", "p95", "max"):
        ratio = lateness[key] / baseline[key] if baseline[key] else float("nan")
        print(f"{'lateness ' + key:<36}{lateness[key]:>10.3f}{baseline[key]:>10.3f}{ratio:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
