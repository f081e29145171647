"""Arm driver measurements: xArm streaming rate and jitter, command-to-motion latency and cancel-to-stopped
time on both backends, and the cost of the safety check.

The xArm runs the real xarm-python-sdk against the loopback controller emulator; the Franka runs the real
franky against franky-sim (MuJoCo, libfranka protocol) in a child process. Each figure is printed next to a
baseline measured in the same run (the bare SDK doing the same thing without our layer, or an empty loop on
the same schedule) and their ratio. Nothing here passes or fails. Run:

    .venv/bin/python benchmarks/bench_robots.py
"""

from __future__ import annotations

import faulthandler
import logging
import sys
import threading
import time
from pathlib import Path

import numpy as np

from robopin.robots.base import make_arm
from robopin.robots.franka_arm import FrankaArmConfig
from robopin.robots.safety import SafetyConfig
from robopin.robots.xarm_arm import XArmConfig
from robopin.stats import summarize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the controller emulators live in tests/doubles
from tests.doubles.xarm_emulator import XArmControllerEmulator

REPEATS = 5
# The watchdog limits are relaxed so a loaded machine (shared CI cores) does not stop a measured motion;
# the figures themselves do not depend on them.
SAFETY = SafetyConfig(state_max_age_s=1.0, command_timeout_s=1.0)


def report(name: str, value: float, unit: str, baseline_name: str, baseline: float) -> None:
    ratio = value / baseline if baseline else float("nan")
    print(f"{name:<44} {value:10.3f} {unit:<6} | {baseline_name:<36} {baseline:10.3f} {unit:<6} | ratio {ratio:7.2f}")


def median(values: list[float]) -> float:
    return summarize(values).median if values else float("nan")


def in_thread(function, *args):
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(result=function(*args)), daemon=True)
    thread.start()
    return thread, box


def wait_until(predicate, timeout_s: float = 30.0, period_s: float = 0.0005) -> float:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(period_s)
    return time.monotonic()


def schedule_jitter(rate_hz: float, count: int) -> np.ndarray:
    """Intervals of an empty loop on the same absolute schedule the xArm streamer uses (baseline)."""
    period = 1.0 / rate_hz
    start = time.monotonic()
    stamps = []
    for k in range(count):
        stamps.append(time.monotonic())
        delay = start + (k + 1) * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return np.diff(stamps)


def bench_xarm() -> None:
    print("== xArm (xarm-python-sdk 1.18 -> loopback controller emulator) ==")
    with XArmControllerEmulator() as emulator:
        for rate in (100.0, 150.0, 250.0):
            arm = make_arm(XArmConfig(ip=emulator.settings.host, stream_rate_hz=rate, safety=SAFETY))
            arm.connect()
            arm.enable()
            try:
                start = arm.joint_state().positions
                trajectory = arm.plan_move(start + np.array([0.6, -0.2, 0.2, 0.0, 0.3, 0.4])).scaled(0.25)
                since = time.monotonic()
                result = arm.execute(trajectory)
                assert result.success, result
                intervals = np.diff(arm.last_stream_times_s)
                arrivals = np.diff(emulator.servo_times(since))
                baseline = schedule_jitter(rate, intervals.size + 1)
                report(f"stream rate @{rate:.0f} Hz (sent)", 1.0 / intervals.mean(), "Hz", "requested", rate)
                report(f"stream rate @{rate:.0f} Hz (controller side)", 1.0 / arrivals.mean(), "Hz", "requested", rate)
                report(
                    f"stream jitter @{rate:.0f} Hz (std of interval)",
                    intervals.std() * 1e3,
                    "ms",
                    "empty loop, same schedule",
                    baseline.std() * 1e3,
                )
                p99 = np.percentile(np.abs(intervals - 1.0 / rate), 99) * 1e3
                p99_base = np.percentile(np.abs(baseline - 1.0 / rate), 99) * 1e3
                report(f"stream |interval error| p99 @{rate:.0f} Hz", p99, "ms", "empty loop, same schedule", p99_base)
                arm.move_to_joints(start)
            finally:
                arm.disconnect()

        arm = make_arm(XArmConfig(ip=emulator.settings.host, safety=SAFETY))
        arm.connect()
        arm.enable()
        try:
            latencies, raw_latencies, cancel_return, cancel_still, raw_stop = [], [], [], [], []
            for _ in range(REPEATS):
                start = arm.joint_state().positions
                goal = start + np.array([0.4, 0, 0, 0, 0, 0])
                trajectory = arm.plan_move(goal)
                emulator.reset_motion_clock()
                t0 = time.monotonic()
                arm.execute(trajectory)
                latencies.append(emulator.first_motion_s - t0)
                # Baseline: the bare SDK's servo-j (mode 1, ready) to the first joint motion.
                api = arm._api  # the SDK handle, for the bare-SDK baseline only
                api.set_mode(1)
                api.set_state(0)
                target = arm.joint_state().positions + np.array([-0.01, 0, 0, 0, 0, 0])
                emulator.reset_motion_clock()
                t0 = time.monotonic()
                api.set_servo_angle_j([float(v) for v in target], is_radian=True)
                wait_until(lambda: emulator.first_motion_s is not None)
                raw_latencies.append(emulator.first_motion_s - t0)
                time.sleep(0.05)
                # Cancel mid-motion: to the controller at rest and to execute() reporting stopped.
                back = arm.plan_move(start - np.array([0.3, 0, 0, 0, 0, 0])).scaled(0.3)
                emulator.reset_motion_clock()
                thread, _box = in_thread(arm.execute, back)
                wait_until(lambda: emulator.first_motion_s is not None)
                time.sleep(0.2)
                emulator.stopped_s = None
                t0 = time.monotonic()
                arm.cancel()
                thread.join()
                cancel_return.append(time.monotonic() - t0)
                wait_until(lambda: emulator.stopped_s is not None)
                cancel_still.append(emulator.stopped_s - t0)
                # Baseline: the bare SDK stop (set_state(4)) while streaming by hand.
                api.set_mode(1)
                api.set_state(0)
                q = arm.joint_state().positions.copy()
                for _ in range(20):
                    q[0] += 0.004
                    api.set_servo_angle_j([float(v) for v in q], is_radian=True)
                    time.sleep(0.01)
                emulator.stopped_s = None
                t0 = time.monotonic()
                api.set_state(4)
                wait_until(lambda: emulator.stopped_s is not None)
                raw_stop.append(emulator.stopped_s - t0)
                arm.move_to_joints(start)
            report(
                "command-to-motion latency (execute)",
                median(latencies) * 1e3,
                "ms",
                "bare SDK servo-j",
                median(raw_latencies) * 1e3,
            )
            report(
                "cancel -> controller at rest",
                median(cancel_still) * 1e3,
                "ms",
                "bare SDK set_state(4)",
                median(raw_stop) * 1e3,
            )
            report(
                "cancel -> execute() returns (stopped)",
                median(cancel_return) * 1e3,
                "ms",
                "bare SDK set_state(4)",
                median(raw_stop) * 1e3,
            )
            trajectory = arm.plan_move(arm.joint_state().positions + 0.3)
            state = arm.joint_state()
            t0 = time.perf_counter()
            for _ in range(20):
                arm.safety.validate(trajectory, state)
            check_s = (time.perf_counter() - t0) / 20
            report(
                "safety check of a trajectory", check_s * 1e3, "ms", "trajectory duration", trajectory.duration_s * 1e3
            )
        finally:
            arm.disconnect()


def bench_franka() -> None:
    print("== Franka (franky 2.0 -> franky-sim, MuJoCo) ==")
    try:
        import franky

        from tests.doubles.franka_sim_process import FrankaSimProcess
    except ImportError as error:
        print(f"skipped: {error}")
        return
    with FrankaSimProcess() as sim:
        arm = make_arm(FrankaArmConfig(ip=sim.hostname, safety=SAFETY))  # at the shipped dynamics factor
        arm.connect()
        arm.enable()
        robot = arm._robot  # the franky handle, for the bare-SDK baselines only
        try:
            latencies, raw_latencies, cancel_return, raw_stop = [], [], [], []
            for _ in range(3):
                start = arm.joint_state().positions
                trajectory = arm.plan_move(start + np.array([0.4, 0, 0, 0, 0, 0, 0]))
                t0 = time.monotonic()
                thread, _ = in_thread(arm.execute, trajectory)
                moved = wait_until(lambda s=start: abs(arm.joint_state().positions[0] - s[0]) > 1e-3)
                latencies.append(moved - t0)
                thread.join()
                here = arm.joint_state().positions
                t0 = time.monotonic()
                robot.move(franky.JointMotion(here - np.array([0.4, 0, 0, 0, 0, 0, 0])), asynchronous=True)
                moved = wait_until(lambda h=here: abs(arm.joint_state().positions[0] - h[0]) > 1e-3)
                raw_latencies.append(moved - t0)
                robot.join_motion()
                arm.wait_until_still()
                # Cancel mid-motion, to execute() returning with the arm at rest.
                here = arm.joint_state().positions
                slow = arm.plan_move(here + np.array([1.0, 0, 0, 0, 0, 0, 0])).scaled(0.3)
                thread, _ = in_thread(arm.execute, slow)
                wait_until(lambda h=here: abs(arm.joint_state().positions[0] - h[0]) > 0.05)
                t0 = time.monotonic()
                arm.cancel()
                thread.join()
                cancel_return.append(time.monotonic() - t0)
                # Baseline: franky's own stop of a running motion, to the same at-rest threshold.
                here = arm.joint_state().positions
                robot.move(franky.JointMotion(here - np.array([1.0, 0, 0, 0, 0, 0, 0])), asynchronous=True)
                wait_until(lambda h=here: abs(arm.joint_state().positions[0] - h[0]) > 0.05)
                t0 = time.monotonic()
                try:
                    robot.stop()
                    robot.join_motion()
                except (franky.Exception, RuntimeError):
                    pass  # the preempted motion reports itself
                arm.wait_until_still()
                raw_stop.append(time.monotonic() - t0)
                arm.move_to_joints(start)
            report(
                "command-to-motion latency (execute)",
                median(latencies) * 1e3,
                "ms",
                "bare franky JointMotion",
                median(raw_latencies) * 1e3,
            )
            report(
                "cancel -> execute() returns (at rest)",
                median(cancel_return) * 1e3,
                "ms",
                "bare franky stop()",
                median(raw_stop) * 1e3,
            )
        finally:
            arm.disconnect()


def main() -> None:
    faulthandler.dump_traceback_later(240, exit=True)  # a hang prints every stack instead of sitting there
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("origin.print").setLevel(logging.CRITICAL)
    started = time.monotonic()
    bench_xarm()
    bench_franka()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
