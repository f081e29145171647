"""task_node over real DDS on the simulator's long-horizon scenario: cancel stops the arm, and a
task runs several pick-and-place steps with history until the oracle reports it done.

Uses the stack process of ``test_task_node`` (see its docstring) with the long-horizon scene; a
module of its own so only one stack runs at a time.
"""

from __future__ import annotations

import time

import pytest

from tests.ros.test_task_node import Client, start_stack

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module")
def long_horizon_stack(tmp_path_factory):
    from tests.ros.rostest_utils import stop_process

    process, setup = start_stack(tmp_path_factory.mktemp("planner_long_horizon"), "long_horizon")
    yield setup
    code, output = stop_process(process, timeout_s=30)
    print(output[-20000:])  # the stack's log, shown by pytest when a test of this module failed
    assert code == 0, f"stack did not shut down cleanly (exit {code}):\n{output[-6000:]}"


@pytest.fixture
def long_horizon(ros_context, long_horizon_stack):
    client = Client(ros_context)
    yield client, long_horizon_stack
    client.close()


def test_cancel_stops_the_arm(long_horizon):
    from tests.ros.rostest_utils import wait_for, wait_future, wait_result

    client, setup = long_horizon
    from robopin_interfaces.action import ExecuteTask

    feedback: list = []
    goal = ExecuteTask.Goal(instruction=setup["instruction"])
    handle = wait_future(client.action.send_goal_async(goal, lambda fb: feedback.append(fb.feedback)), 30, "goal")
    wait_for(lambda: any(f.stage == "executing" for f in feedback), 120, "the pick-and-place to start")
    moving_since = time.monotonic()
    # Cancel as soon as the arm is seen moving: early in the approach, before anything is grasped.
    wait_for(lambda: client.joint_motion_since(moving_since) > 0.01, 30, "the arm to move")
    wait_future(handle.cancel_goal_async(), 10, "cancel response")
    wrapped = wait_result(handle, 60, "canceled result")
    stopped_at = time.monotonic()
    assert (wrapped.result.success, wrapped.result.reason) == (False, "canceled"), wrapped.result.message
    assert client.joint_motion_since(moving_since) > 0.01, "the arm never moved before the cancel"
    time.sleep(1.5)
    assert client.joint_motion_since(stopped_at + 0.2) < 1e-3, "the arm kept moving after the cancel"
    assert not client.trigger(client.check_success).success
    assert client.trigger(client.reset_arm).success


def test_long_horizon_task_runs_several_steps_until_the_model_reports_done(long_horizon):
    client, setup = long_horizon
    client.reasoning.clear()

    class ArrivalList(list):
        """Feedback with the arrival time of each message."""

        def __init__(self) -> None:
            super().__init__()
            self.times: list[float] = []

        def append(self, item) -> None:
            super().append(item)
            self.times.append(time.monotonic())

    feedback = ArrivalList()
    images_before = len(client.image_times)
    result, _, _ = client.run_task(setup["instruction"], feedback=feedback, timeout_s=600)
    goals = setup["goals"]
    assert result.success, f"{result.reason}: {result.message}"
    assert result.steps_executed == len(goals) >= 2
    assert [m.step for m in result.reasoning_steps] == list(range(len(goals) + 1))
    assert all(m.valid for m in result.reasoning_steps)
    assert sorted({f.step for f in feedback if f.stage == "executing"}) == list(range(len(goals)))
    # The PinCoT drawn on the views is for people watching: it waits until each step has moved past its
    # plan request, and never arrives between the model's answer and the plan.
    images = client.image_times[images_before:]
    assert images, "no annotated image was published"
    for step in range(len(goals)):
        stamps: dict[str, float] = {}
        for message, arrived in zip(feedback, feedback.times, strict=True):
            if message.step == step:
                stamps.setdefault(message.stage, arrived)
        during = [t for t in images if stamps["validating"] < t < stamps["planning"]]
        assert not during, f"step {step}: {len(during)} annotated image(s) published during the step's own path"
    assert [m.step for m in client.reasoning] == list(range(len(goals) + 1))
    report = client.trigger(client.check_success)
    assert report.success, report.message
