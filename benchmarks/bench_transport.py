"""Image transport between two processes: two 640x480 cameras (RGB + 16-bit depth) at 30 Hz.

Compares the project's Fast DDS profile (config/fastdds.xml: 32 MB shared-memory segment) with the
default Fast DDS transports, in the same run, for RELIABLE and BEST_EFFORT QoS. Prints delivered rate,
drops, latency p50/p95 per configuration and the ratio of the default profile to ours. Not a test.

    .venv/bin/python benchmarks/bench_transport.py [--seconds 5] [--rate 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from robopin.env import ros_environment, test_domain_id  # noqa: E402
from robopin.stats import summarize  # noqa: E402

CAMERAS = ("static", "wrist")
WIDTH, HEIGHT = 640, 480


def _topics() -> list[tuple[str, str]]:
    return [(f"/cameras/{c}/color/image_raw", "rgb8") for c in CAMERAS] + [
        (f"/cameras/{c}/aligned_depth_to_color/image_raw", "16UC1") for c in CAMERAS
    ]


def _qos(reliability: str):
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    policy = ReliabilityPolicy.RELIABLE if reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT
    return QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=policy)


def run_publisher(frames: int, rate_hz: float, reliability: str) -> None:
    import numpy as np
    import rclpy
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("bench_transport_publisher")
    pubs = [(node.create_publisher(Image, topic, _qos(reliability)), encoding) for topic, encoding in _topics()]
    done_pub = node.create_publisher(String, "/bench/done", 10)
    rng = np.random.default_rng(0)
    color = rng.integers(0, 255, (HEIGHT, WIDTH, 3), dtype=np.uint8).tobytes()
    depth = rng.integers(300, 2000, (HEIGHT, WIDTH), dtype=np.uint16).tobytes()
    deadline = time.monotonic() + 20
    while any(p.get_subscription_count() == 0 for p, _ in pubs) or done_pub.get_subscription_count() == 0:
        if time.monotonic() > deadline:
            raise SystemExit("subscriber never matched")
        time.sleep(0.05)
    time.sleep(0.5)
    period = 1.0 / rate_hz
    start = time.monotonic()
    for i in range(frames):
        for pub, encoding in pubs:
            msg = Image(height=HEIGHT, width=WIDTH, encoding=encoding, is_bigendian=0)
            msg.step = WIDTH * (3 if encoding == "rgb8" else 2)
            msg.data = color if encoding == "rgb8" else depth
            msg.header.frame_id = str(i)
            now = time.time()
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(now), int((now % 1) * 1e9)
            pub.publish(msg)
        next_tick = start + (i + 1) * period
        time.sleep(max(0.0, next_tick - time.monotonic()))
    time.sleep(0.5)
    for _ in range(5):
        done_pub.publish(String(data=json.dumps({"frames": frames, "elapsed_s": time.monotonic() - start})))
        time.sleep(0.1)
    node.destroy_node()
    rclpy.shutdown()


def run_subscriber(reliability: str) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("bench_transport_subscriber")
    latencies: dict[str, list[float]] = {t: [] for t, _ in _topics()}
    first_last: dict[str, list[float]] = {}
    done: list[dict] = []

    def on_image(topic: str):
        def callback(msg: Image) -> None:
            now = time.time()
            latencies[topic].append(now - (msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9))
            first_last.setdefault(topic, [now, now])[1] = now

        return callback

    for topic, _ in _topics():
        node.create_subscription(Image, topic, on_image(topic), _qos(reliability))
    node.create_subscription(String, "/bench/done", lambda m: done.append(json.loads(m.data)), 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    deadline = time.monotonic() + 120
    while not done and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
    frames = done[0]["frames"] if done else 0
    report = {}
    for topic, values in latencies.items():
        span = first_last.get(topic, [0, 0])
        report[topic] = {
            "received": len(values),
            "sent": frames,
            "rate_hz": (len(values) - 1) / (span[1] - span[0]) if len(values) > 1 and span[1] > span[0] else 0.0,
            "latencies_ms": [v * 1e3 for v in values],
        }
    print("RESULT " + json.dumps(report), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def measure(profile: bool, reliability: str, seconds: float, rate_hz: float, domain: int) -> dict:
    env = ros_environment(domain_id=domain, log_dir=tempfile.mkdtemp(prefix="bench-ros-log-"), use_profile=profile)
    frames = int(seconds * rate_hz)
    me = [sys.executable, __file__, "--reliability", reliability]
    sub = subprocess.Popen([*me, "--role", "subscriber"], env=env, stdout=subprocess.PIPE, text=True)
    pub = subprocess.Popen([*me, "--role", "publisher", "--frames", str(frames), "--rate", str(rate_hz)], env=env)
    pub.wait(timeout=seconds + 60)
    out, _ = sub.communicate(timeout=60)
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"subscriber printed no result (profile={profile}, {reliability})")
    per_topic = json.loads(line[len("RESULT ") :])
    latency = summarize(v for t in per_topic.values() for v in t["latencies_ms"])
    return {
        "sent": sum(t["sent"] for t in per_topic.values()),
        "received": sum(t["received"] for t in per_topic.values()),
        "min_rate_hz": min(t["rate_hz"] for t in per_topic.values()),
        "p50_ms": latency.median,
        "p95_ms": latency.p95,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["bench", "publisher", "subscriber"], default="bench")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=30.0)
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--reliability", choices=["reliable", "best_effort"], default="reliable")
    args = parser.parse_args()
    if args.role == "publisher":
        return run_publisher(args.frames, args.rate, args.reliability)
    if args.role == "subscriber":
        return run_subscriber(args.reliability)

    domain = test_domain_id(os.getpid() + 17)
    print(f"Image transport, 2 cameras x (640x480 rgb8 + 640x480 16UC1) at {args.rate:g} Hz, {args.seconds:g} s, "
          f"ROS_DOMAIN_ID={domain}")
    print(f"{'QoS':<12} {'profile':<10} {'received':>12} {'drops':>6} {'min rate Hz':>12} {'p50 ms':>8} {'p95 ms':>8}")
    results = {}
    for reliability in ("reliable", "best_effort"):
        for profile in (True, False):
            r = measure(profile, reliability, args.seconds, args.rate, domain)
            results[reliability, profile] = r
            name = "robopin" if profile else "default"
            print(f"{reliability:<12} {name:<10} {r['received']:>6}/{r['sent']:<5} {r['sent'] - r['received']:>6} "
                  f"{r['min_rate_hz']:>12.1f} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f}", flush=True)
    for reliability in ("reliable", "best_effort"):
        ours, default = results[reliability, True], results[reliability, False]
        print(f"{reliability}: default/robopin latency ratio p50 {default['p50_ms'] / ours['p50_ms']:.1f}x, "
              f"p95 {default['p95_ms'] / ours['p95_ms']:.1f}x; delivered {ours['received']} vs {default['received']}")
    ours = results["reliable", True]
    goal = ours["received"] == ours["sent"] and ours["p95_ms"] < 5.0
    print(f"goal (reliable, robopin profile: no drops, p95 < 5 ms): {'met' if goal else 'NOT met'}")


if __name__ == "__main__":
    main()
