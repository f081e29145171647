"""robopin's action client and server are whole by the time rclpy hands them to their node's executor.

rclpy (jazzy, ``rclpy/action/client.py`` and ``server.py``) ends ``ActionClient.__init__`` and
``ActionServer.__init__`` with ``node.add_waitable(self)``: from that call an executor already spinning the node can
execute the entity (a server's latched status for a client; a goal or result request for a server). Anything a
subclass sets after ``super().__init__()`` returns can be missing when that happens (an executor thread then raises
``AttributeError`` and the request it took is never answered). The moment is too short to hit on demand, so the test
looks at it directly: the node's ``add_waitable`` (rclpy's own) is watched, and what the entity holds at that moment
is compared with what it holds once built. Only attributes rclpy itself sets after that call (found the same way on
rclpy's own classes) may be late.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros


def _late_attributes(ros_context, build) -> set[str]:
    """Attributes the entity ``build(node)`` makes gains after rclpy adds it to the node's waitables."""
    from rclpy.node import Node

    node = Node("construction_probe", context=ros_context, namespace="/constructiontest")
    at_registration: dict[int, set[str]] = {}
    add_waitable = node.add_waitable

    def watched(waitable):
        at_registration[id(waitable)] = set(vars(waitable))
        return add_waitable(waitable)

    node.add_waitable = watched
    try:
        entity = build(node)
        try:
            return set(vars(entity)) - at_registration[id(entity)]
        finally:
            entity.destroy()
    finally:
        node.destroy_node()


def _server_kwargs():
    from rclpy.action import CancelResponse

    return dict(execute_callback=lambda goal_handle: None, handle_accepted_callback=lambda goal_handle: None,
                cancel_callback=lambda _goal: CancelResponse.ACCEPT)


def test_robopin_action_client_sets_nothing_of_its_own_after_its_node_can_run_it(ros_context):
    from rclpy.action import ActionClient as RclpyActionClient
    from robopin_interfaces.action import ExecuteTask
    from robopin_ros.actions import ActionClient

    upstream = _late_attributes(ros_context, lambda node: RclpyActionClient(node, ExecuteTask, "task"))
    ours = _late_attributes(ros_context, lambda node: ActionClient(node, ExecuteTask, "task"))
    assert ours <= upstream, f"set after the executor could run the client: {sorted(ours - upstream)}"


def test_robopin_action_server_sets_nothing_of_its_own_after_its_node_can_run_it(ros_context):
    from rclpy.action import ActionServer
    from robopin_interfaces.action import ExecuteTask
    from robopin_ros.actions import ResultOwingActionServer

    upstream = _late_attributes(ros_context, lambda node: ActionServer(node, ExecuteTask, "task", **_server_kwargs()))
    ours = _late_attributes(ros_context, lambda node: ResultOwingActionServer(
        node, ExecuteTask, "task", unsent_callback=lambda goal_handle: None, **_server_kwargs()))
    assert ours <= upstream, f"set after the executor could run the server: {sorted(ours - upstream)}"
