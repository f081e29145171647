"""How long a newly started process takes to see a running task_node's action server, as the start-up check
of a launched node does (``robopin_ros.actions.served_elsewhere``: from the moment the graph holds the process's
own endpoint until the server's ``_action/status`` publisher shows).

One task_node (the real node, ``python -m robopin_ros.task_node``) runs in a domain of its own; then, ``--starts``
times each, a fresh probe process starts and times the discovery: first with nothing else in the domain (the
baseline), then with ``--crowd`` idle participants beside it (other processes' nodes). Prints median, p95 and
the slowest per condition, the ratio to the baseline, and how many starts took longer than the start-up window
(``DISCOVERY_S``). Run it beside a load (a test run, a trial batch) to see a busy machine. Not a test.

    .venv/bin/python benchmarks/bench_discovery.py [--starts 20] [--crowd 6]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from robopin.env import ros_environment, test_domain_id  # noqa: E402
from robopin.stats import summarize  # noqa: E402

STATUS = "/robopin/execute_task/_action/status"

PROBE = f"""
import sys, time
import rclpy
from std_msgs.msg import Empty
context = rclpy.Context()
rclpy.init(context=context)
node = rclpy.create_node("discovery_probe", context=context)
node.create_publisher(Empty, "discovery_probe_own", 1)
own = None
deadline = time.monotonic() + 30.0
while time.monotonic() < deadline:
    now = time.monotonic()
    if own is None and node.get_publishers_info_by_topic("/discovery_probe_own"):
        own = now
    if own is not None and node.get_publishers_info_by_topic("{STATUS}"):
        print(now - own)
        sys.exit(0)
    time.sleep(0.01)
print("nan")
"""

IDLE = """
import time
import rclpy
context = rclpy.Context()
rclpy.init(context=context)
node = rclpy.create_node("idle_participant", context=context)
time.sleep(3600)
"""


def _starts(env: dict[str, str], count: int) -> list[float]:
    found = []
    for _ in range(count):
        out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
        found.append(float(out.stdout.strip().splitlines()[-1]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=20, help="probe starts per condition")
    parser.add_argument("--crowd", type=int, default=6, help="idle participants in the domain, second condition")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "ros2_ws" / "src" / "robopin_ros"))
    from robopin_ros.actions import DISCOVERY_S

    env = ros_environment(dict(os.environ), domain_id=test_domain_id(), localhost_only=True)
    server = subprocess.Popen([sys.executable, "-m", "robopin_ros.task_node", "--ros-args"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    crowd: list[subprocess.Popen] = []
    try:
        for line in server.stderr:  # the node says so once its own start-up checks passed
            if "planner ready" in line:
                break
        threading.Thread(target=server.stderr.read, daemon=True).start()  # its later logs must not fill the pipe
        results = {"alone": _starts(env, args.starts)}
        crowd = [subprocess.Popen([sys.executable, "-c", IDLE], env=env) for _ in range(args.crowd)]
        time.sleep(5.0)
        results[f"{args.crowd} idle participants"] = _starts(env, args.starts)
    finally:
        for process in (*crowd, server):
            process.terminate()
            process.wait(timeout=30)
    base = summarize(results["alone"]).median
    print(f"discovery of a running task_node's action server, {args.starts} starts per condition "
          f"(start-up window DISCOVERY_S = {DISCOVERY_S} s)")
    for name, times in results.items():
        s = summarize(times)
        late = sum(not t <= DISCOVERY_S for t in times)  # NaN: never found
        ratio = s.median / base if base > 0 else float("nan")
        print(f"  {name:26s} median {s.median:.3f} s ({ratio:.1f}x alone)  p95 {s.p95:.3f} s  max {s.max:.3f} s  "
              f"over the window {late}/{len(times)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
