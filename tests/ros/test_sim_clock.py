"""The simulator's clock on /clock (robopin_ros.bringup.SimClockPublisher), over DDS to nodes with ``use_sim_time``
as ``robopin up`` starts a simulated system's: their time is the world's, which moves only while its physics steps,
and their steady timers (robopin_ros.runtime.steady_timer) go on while it stands."""

from __future__ import annotations

import threading
import time

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from robopin_ros.bringup import SimClockPublisher
from robopin_ros.conversions import seconds_to_stamp, stamp_to_seconds
from robopin_ros.runtime import destroy_when_stopped, steady_timer

from robopin.sim.world import SimWorld

from .rostest_utils import wait_for


class _SimTimeNode:
    """A node on the simulator's clock, spun on a thread of its own, counting its timers' calls."""

    def __init__(self, name: str, context) -> None:
        self.node = Node(name, context=context, parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.on_clock, self.on_steady = [], []
        self.node.create_timer(0.05, lambda: self.on_clock.append(self.now()))  # a timer on the node's (ROS) clock
        steady_timer(self.node, 0.05, lambda: self.on_steady.append(self.now()))
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def now(self) -> float:
        return stamp_to_seconds(self.node.get_clock().now().to_msg())

    def close(self) -> None:
        destroy_when_stopped(self._executor, self._thread, [self.node])


def test_nodes_on_the_simulators_clock_follow_the_world_and_keep_their_steady_timers_while_it_stands(ros_context):
    world = SimWorld("sim-clock-test", robot="panda")
    world.step(120)  # half a second, as a layout's settling steps it: a clock at 0 would prove nothing
    simulator = Node("simulator", context=ros_context)
    clock = SimClockPublisher(world, simulator)
    first = _SimTimeNode("first", ros_context)
    later = None
    try:
        def world_now() -> float:  # as a stamp reads
            return stamp_to_seconds(seconds_to_stamp(world.sim_time_s))

        wait_for(lambda: first.now() == world_now(), 20, "the node's clock at the world's time")
        still = first.now()
        clock_calls, steady_calls = len(first.on_clock), len(first.on_steady)
        wait_for(lambda: len(first.on_steady) >= steady_calls + 3, 20, "steady timer calls while the world stands")
        assert first.now() == still == pytest.approx(0.5), "the world stood still: so does the node's clock"
        assert len(first.on_clock) == clock_calls, "a timer on the node's clock does not run while it stands"
        assert all(t == still for t in first.on_steady[steady_calls:])

        # A node that starts while the world stands hears its time too (sent again while it stands still).
        time.sleep(0.3)
        later = _SimTimeNode("later", ros_context)
        wait_for(lambda: later.now() == still, 20, "a later node's clock at the world's standing time")

        world.step(240)  # one second of simulated time, as an arm's controller steps it
        wait_for(lambda: first.now() == world_now() and later.now() == world_now(), 20, "the clocks after the step")
        assert first.now() - still == pytest.approx(1.0, abs=1e-6)
        wait_for(lambda: len(first.on_clock) > clock_calls, 20, "the node's clock timer after its clock moved")
    finally:
        for node in (first, later):
            if node is not None:
                node.close()
        clock.close()
        simulator.destroy_node()
        world.close()
