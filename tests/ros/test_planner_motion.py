"""planner_node with the real motion_planner_node over DDS: the spatial task as a dry run goes through
observation, the oracle's reasoning, the real projection_node and a real PickPlace plan (CPU planner)
without moving the arm. Uses the stack process of ``test_planner_node`` (its own module: one stack
at a time); the stand-in there still plays cameras and the arm state."""

from __future__ import annotations

import time

import pytest

from tests.ros.test_planner_node import VIEWS, Client, start_stack

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module")
def motion_stack(tmp_path_factory):
    from tests.ros.rostest_utils import stop_process

    motion = {"motion_planner_node": {"ros__parameters": {"robot": "panda", "table_height_m": 0.0}}}
    process, setup = start_stack(
        tmp_path_factory.mktemp("planner_motion"), "spatial", motion="real", extra_params=motion
    )
    yield setup
    code, output = stop_process(process, timeout_s=30)
    print(output[-20000:])  # the stack's log, shown by pytest when a test of this module failed
    assert code == 0, f"stack did not shut down cleanly (exit {code}):\n{output[-6000:]}"


def test_spatial_dry_run_plans_a_real_pick_place_without_moving(ros_context, motion_stack):
    from robopin_interfaces.action import ExecuteTask

    from tests.ros.rostest_utils import wait_future

    client = Client(ros_context)
    try:
        started = time.monotonic()
        feedback: list = []
        goal = ExecuteTask.Goal(instruction=motion_stack["instruction"], dry_run=True)
        handle = wait_future(client.action.send_goal_async(goal, lambda fb: feedback.append(fb.feedback)), 30, "goal")
        result = wait_future(handle.get_result_async(), 240, "dry-run result").result
        assert result.success, f"{result.reason}: {result.message}"
        assert result.steps_executed == 1 and "planned (dry run)" in result.message
        stages = [f.stage for f in feedback]
        assert stages.index("projecting") < stages.index("planning") < stages.index("done")
        assert "executing" not in stages
        assert result.reasoning_steps[0].view_names == list(VIEWS)
        assert client.joint_motion_since(started) < 1e-3
    finally:
        client.close()
