"""The whole chain over DDS on the simulator, nothing stood in but the cameras: planner_node (oracle)
→ projection_node → motion_planner_node (CPU planner) → arm_driver_node (sim backend) carries out
RoboPIN's spatial task from one Instruct call. The cameras are rendered continuously by the stack's
stand-in (stamped when taken). Uses the stack process of ``test_planner_node``."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.ros.test_planner_node import WORLD, Client, start_stack

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module")
def full_stack(tmp_path_factory):
    from tests.ros.rostest_utils import stop_process

    options = {"robot": "panda", "world": WORLD, "safety": {"state_max_age_s": 5.0, "command_timeout_s": 5.0}}
    params = {
        "arm_driver": {"ros__parameters": {"backend": "sim", "options": yaml.safe_dump(options)}},
        "motion_planner_node": {
            "ros__parameters": {"robot": "panda", "planner": "{type: roboplan, timeout_s: 3.0}", "table_height_m": 0.0}
        },
    }
    folder = tmp_path_factory.mktemp("planner_full")
    process, setup = start_stack(folder, "spatial", motion="real-arm", extra_params=params, live_cameras=True)
    yield setup
    code, output = stop_process(process, timeout_s=30)
    print(output[-30000:])  # the stack's log, shown by pytest when a test of this module failed
    assert code == 0, f"stack did not shut down cleanly (exit {code}):\n{output[-6000:]}"


def test_spatial_task_completes_through_the_real_motion_planner_and_arm_driver(ros_context, full_stack):
    from robopin_interfaces.srv import Instruct

    from tests.ros.rostest_utils import wait_for

    client = Client(ros_context)
    try:
        reply = client.call(client.instruct, Instruct.Request(instruction=full_stack["instruction"]))
        assert reply.accepted, reply.message
        wait_for(lambda: client.trigger(client.check_success).success, 400, "the spatial task to succeed")
        assert client.reasoning and client.reasoning[0].valid

        # The task ends (the arm retreats first) and frees the planner for the next instruction.
        def accepted() -> bool:
            time.sleep(1.0)
            request = Instruct.Request(instruction=full_stack["instruction"], dry_run=True)
            return client.call(client.instruct, request).accepted

        wait_for(accepted, 300, "the planner to accept a new instruction")
    finally:
        client.close()
