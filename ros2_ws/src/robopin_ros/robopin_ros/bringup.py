"""The in-process runner: every node of a system file in one process, each on its own executor, plus a task client.

``robopin up`` uses this where the ``ros2`` CLI and launch are absent (CI, this machine kind) and for
simulated systems everywhere (the pybullet world the sim camera, arm and oracle backends share lives
in one process). :class:`Bringup` builds the simulated scene when the system has one, writes the
system's parameters to a ROS 2 parameters file handed to the context (so each node reads exactly what
``ros2 launch`` would give it), creates the nodes in the system's ``namespace`` and spins them (the recorder
in a child process: :data:`OWN_PROCESS`);
:func:`spin_until_signal` waits for Ctrl-C or SIGTERM with :func:`robopin_ros.runtime.stop_signals`, as a single
node does. The task client is :class:`robopin_ros.task_client.TaskClient`; one judged trial is
:func:`robopin.trials.stack_trial.run_trial`.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rclpy.executors import Executor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from robopin.env import apply_ros_environment
from robopin.interfaces import ACTION_STATUS_SUFFIX, EXECUTE_TASK, ROBOPIN_ROOT, ready_service
from robopin.system import SystemFile, SystemFileError
from robopin.system.names import absolute_name
from robopin.system.task_run import BringupError
from robopin_ros.actions import DISCOVERY_S, NAMING_S, UNNAMED_NODE, ActionServers, wait_future
from robopin_ros.parameters import refuse_undeclared_parameters
from robopin_ros.runtime import (
    PARENT_PID_ENV,
    SHUTDOWN_EXIT_S,
    end_context,
    executor_threads_running,
    exit_watchdog,
    make_executor,
    shutdown_executor,
    stop_nodes,
    stop_signals,
)
from robopin_ros.task_client import TaskClient

logger = logging.getLogger(__name__)

__all__ = ["OWN_PROCESS", "Bringup", "BringupError", "NodeProcess", "NodeStartError", "sim_calibrations",
           "spin_until_signal"]

# Executables robopin up runs in a process of their own, as `ros2 launch` runs every node. The recorder needs
# nothing of the simulated world and loads whatever interpreter it shares without pause: an rclpy wait-set
# pass over its ~30 subscriptions for every joint state, pose and frame, and per task a bag opened, filled
# with the pre-roll and closed. Sharing the stack's process it held the interpreter a fifth of the time
# the stack held it, and the steps waited: over 16 dry-run steps through the nodes (bench_e2e's task) the
# oracle's reasoning took 135 -> 55 ms and the projection 42 -> 32 ms median with it in a process of its own.
OWN_PROCESS = frozenset({"recorder_node"})

_START_ORDER = {"motion_planner_node": 0, "task_node": 1, "projection_node": 2, "arm_driver_node": 3,
                "state_publisher_node": 4, "recorder_node": 4, "camera_node": 6}
# Nodes are destroyed in this order once every goal has ended (runtime.stop_nodes): the task layers
# first, the cameras, then the arm's connection, the recorder last so the bag holds the stop.
# Past the shared 10 s in which every executor is asked to stop: how much longer an executor still running a
# callback or waking its spin thread is waited for before its node is left undestroyed.
_STOP_GRACE_S = 20.0
_DESTROY_ORDER = {"task_node": 0, "motion_planner_node": 1, "calibration_node": 2, "projection_node": 3,
                  "camera_node": 4, "replay_node": 5, "arm_driver_node": 6,
                  "state_publisher_node": 7, "recorder_node": 9}


class SimClockPublisher:
    """The simulated world's time on ``/clock`` (``rosgraph_msgs/Clock``), which every node of a simulated system
    takes its time from (``use_sim_time``; robopin.system.SystemFile.ros_parameters_file).

    The world's time moves only while its physics steps, in lockstep with the arm's controller
    (``real_time_factor: 0``): a starved machine slows the cell, and the stamps and ages every node measures on this
    clock slow with it. Sent when the time changed, at most every ``period_s`` of wall time, and again every
    ``still_period_s`` while it stands still: rclpy's time source subscribes best-effort with a depth of one
    (rclpy/time_source.py), so a lost last sample must not leave a node's clock behind a still cell's. Each message
    wakes every node's executor in this process, which is why ``period_s`` is not shorter.
    """

    def __init__(self, world: Any, node: Node, period_s: float = 0.05, still_period_s: float = 1.0) -> None:
        from rclpy.qos import QoSProfile
        from rosgraph_msgs.msg import Clock

        self.world, self.period_s, self.still_period_s = world, period_s, still_period_s
        self._message = Clock
        self.publisher = node.create_publisher(Clock, "/clock", QoSProfile(depth=1))
        self._stop = threading.Event()
        self._publish(world.sim_time_s)  # before the nodes start: their first stamps are the cell's
        self._thread = threading.Thread(target=self._run, name="sim-clock", daemon=True)
        self._thread.start()

    def _publish(self, now_s: float) -> None:
        from robopin_ros.conversions import seconds_to_stamp

        self.publisher.publish(self._message(clock=seconds_to_stamp(now_s)))

    def _run(self) -> None:
        last, sent = None, 0.0
        while not self._stop.wait(self.period_s):
            now_s = self.world.sim_time_s
            if now_s != last or time.monotonic() - sent >= self.still_period_s:
                self._publish(now_s)
                last, sent = now_s, time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


class StackConflictError(BringupError):
    """Another robopin stack already serves this namespace in this ROS domain (one stack per namespace)."""


class NodeStartError(BringupError):
    """A node of the system raised while it was being created; the nodes created before it are stopped."""

    def __init__(self, node: str, executable: str, cause: BaseException) -> None:
        detail = str(cause) or type(cause).__name__
        super().__init__(f"node {node!r} ({executable}) did not start: {detail}")
        self.node, self.executable, self.cause = node, executable, cause


def node_class(executable: str) -> type[Node]:
    """The Node subclass defined in ``robopin_ros.<executable>`` (one node class per file)."""
    module = importlib.import_module(f"robopin_ros.{executable}")
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
               if issubclass(c, Node) and c is not Node and c.__module__ == module.__name__]
    if len(classes) != 1:
        raise SystemFileError(f"robopin_ros.{executable} must define exactly one Node class, found {classes}")
    return classes[0]


def _accepts_node_options(cls: type[Node]) -> bool:
    parameters = inspect.signature(cls.__init__).parameters.values()
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def sim_calibrations(scene: Any, views: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The simulator's true camera mounts as projection_node's ``calibrations`` (static: base; wrist: ee)."""
    mounts = {}
    for view in views:
        spec = scene.world.camera(view)
        mounts[view] = {"parent_frame": "ee" if spec.mount == "ee" else "base",
                        "matrix": np.asarray(spec.T_mount_cam, dtype=float).tolist()}
    return mounts


class NodeProcess:
    """One node of a system in a child process: ``python -m robopin_ros.<executable>`` with the stack's ROS
    arguments (parameters file, namespace, log level), named as the system names it.

    It has a session of its own, so a terminal's Ctrl-C reaches ``robopin up`` alone, which stops this node
    after the stack's goals have ended (the recorder's bag then holds the stop), with SIGTERM: a node handles
    it as Ctrl-C, and a process still importing ends without a traceback (SIGINT raises KeyboardInterrupt
    there). It stops itself once ``robopin up`` is gone however that ended
    (:func:`robopin_ros.runtime.stop_with_parent`). ``not_ready`` asks its ``~/ready`` service, when it has one.
    """

    def __init__(self, name: str, executable: str, ros_args: Sequence[str], ready_client: Any = None) -> None:
        self.name, self.executable = name, executable
        self.ready_client = ready_client
        env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
        self.process = subprocess.Popen([sys.executable, "-m", f"robopin_ros.{executable}", "--ros-args",
                                         "-r", f"__node:={name}", *ros_args], env=env, start_new_session=True)
        logger.info("started %s (%s) in process %d", name, executable, self.process.pid)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_code(self) -> int | None:
        """None while it runs."""
        return self.process.poll()

    def not_ready(self, timeout_s: float = 2.0) -> list[str]:
        """What the node still waits for (its ``~/ready`` answer), or that it is still starting or has exited."""
        code = self.exit_code()
        if code is not None:
            return [f"process {self.pid} exited with code {code}"]
        client = self.ready_client
        if client is None:
            return []
        if not client.service_is_ready():
            return [f"starting (process {self.pid})"]
        from std_srvs.srv import Trigger

        future = client.call_async(Trigger.Request())
        if not wait_future(future, timeout_s) or future.result() is None:
            return [f"{client.srv_name} did not answer within {timeout_s:.0f} s"]
        answer = future.result()
        return [] if answer.success else [answer.message]

    def signal(self) -> None:
        """Ask it to stop (SIGTERM) without waiting."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout_s: float = SHUTDOWN_EXIT_S + 2.0) -> int | None:
        """SIGTERM, then wait for its exit (SIGKILL past ``timeout_s``: its own exit watchdog should come first)."""
        if self.process.poll() is None:
            self.signal()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                logger.warning("%s (process %d) did not exit %.0f s after SIGTERM: killing it", self.name,
                               self.pid, timeout_s)
                self.process.kill()
                self.process.wait(5.0)
        return self.process.returncode




class GraphProbe:
    """A participant of its own in the ROS graph, made before a stack's nodes, to find another stack there.

    Another stack shows as servers of robopin's actions in this namespace (their ``_action/status``
    publishers). The rmw's discovery threads fill the graph cache; nothing needs to spin, and a participant
    already in the domain is found well within :data:`DISCOVERY_S` on loopback. A Fast DDS GUID prefix holds
    the host id (bytes 2-3), the low 16 bits of the process id (4-5) and a per-process random (6-7) (Fast DDS
    ``GuidUtils.hpp``, ``is_on_same_process_as`` compares bytes 2-7), read from each endpoint's gid: servers of
    this very process (a stack it closed: its participant leaves the graph only once Python frees the context)
    and of a dead process of this host (killed: it stays until its 20 s participant lease ends) are not another
    stack; a live one is named with its process id.
    """

    DISCOVERY_S = DISCOVERY_S
    NAMING_S = NAMING_S
    MAX_WAIT_S = 10.0

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.context import Context

        self.namespace = namespace or "/"
        self.started_s = time.monotonic()
        self._context = Context()
        rclpy.init(args=["robopin_up_probe"], context=self._context, signal_handler_options=SignalHandlerOptions.NO)
        self._node = rclpy.create_node("robopin_up_probe", context=self._context, start_parameter_services=False,
                                       enable_rosout=False)
        self._servers = ActionServers(self._node)

    def other_stack(self) -> dict[str, list[str]]:
        """Servers of robopin's actions in this namespace that belong to another living process: each node (with
        where it runs) -> the actions it serves."""
        if self._servers.own_prefix() is None:  # our own endpoint is not in the graph cache yet
            return {}
        prefix = absolute_name(f"{ROBOPIN_ROOT}/", self.namespace)
        found: dict[str, list[str]] = {}
        for topic, _types in self._node.get_topic_names_and_types():
            if topic.startswith(prefix) and topic.endswith(ACTION_STATUS_SUFFIX):
                for process, names in self._servers.by_process(topic).items():
                    if process != b"self":
                        for name in names:
                            found.setdefault(name, []).append(topic.removesuffix(ACTION_STATUS_SUFFIX))
        return found

    def refuse_other_stack(self, system: SystemFile) -> None:
        """Raise :class:`StackConflictError` naming the other stack's nodes when one runs in this namespace.

        Looks for :data:`DISCOVERY_S` from the moment the graph cache holds the probe's own endpoint (at most
        :data:`MAX_WAIT_S` in all); once a server is found, the graph is given up to :data:`NAMING_S` more to
        name its node and show the task action's server (Jazzy's graph names nodes from each participant's
        ``ros_discovery_info``, which arrives after the endpoints).
        """
        seen_own_s: float | None = None
        found_s: float | None = None
        task_action = absolute_name(EXECUTE_TASK, self.namespace)
        while True:
            now = time.monotonic()
            if seen_own_s is None and self._servers.own_prefix() is not None:
                seen_own_s = now
            found = self.other_stack()
            if found and found_s is None:
                found_s = now
            complete = not any(UNNAMED_NODE in name for name in found) and any(
                task_action in actions for actions in found.values())
            if found and (complete or now - found_s >= self.NAMING_S):
                domain = os.environ.get("ROS_DOMAIN_ID", "0")
                named = {name: actions for name, actions in found.items() if UNNAMED_NODE not in name} or found
                servers = "; ".join(f"{name} serves {', '.join(sorted(actions))}"
                                    for name, actions in sorted(named.items()))
                raise StackConflictError(
                    f"{system.name}: another robopin stack already runs in namespace {self.namespace} of ROS domain "
                    f"{domain}: {servers}. One stack serves a namespace: stop the other one, or start this one with "
                    "another namespace (--namespace) or ROS_DOMAIN_ID")
            looked_s = now - seen_own_s if seen_own_s is not None else 0.0
            if not found and (looked_s >= self.DISCOVERY_S or now - self.started_s >= self.MAX_WAIT_S):
                return
            time.sleep(0.05)

    def close(self) -> None:
        self._node.destroy_node()
        end_context(self._context)


def refuse_other_stack(system: SystemFile) -> None:
    """Raise :class:`StackConflictError` when another stack serves ``system``'s namespace (the launch path's
    check; :class:`Bringup` probes while its scene builds)."""
    apply_ros_environment()
    probe = GraphProbe(system.namespace)
    try:
        probe.refuse_other_stack(system)
    finally:
        probe.close()


class Bringup:
    """All nodes of ``system`` in this process (see the module docstring). Use as a context manager."""

    def __init__(self, system: SystemFile, *, threads: int = 4, client: bool = True, log_level: str = "",
                 check_model: bool = True) -> None:
        self.system = system
        self.check_model = check_model  # readiness includes the VLM server serving its model
        self.log_level = log_level  # ROS log level of every node ("warn" keeps a demo's output short)
        self.threads = threads  # per node that asks for a pool (robopin_ros.runtime.make_executor)
        self.want_client = client
        self.scene: Any = None
        self.nodes: dict[str, Node] = {}
        self.processes: dict[str, NodeProcess] = {}  # nodes of OWN_PROCESS executables
        self._supervisor: Node | None = None  # asks those processes whether they are ready
        self._sim_clock: SimClockPublisher | None = None
        self.client: TaskClient | None = None
        # One executor per node, of the kind the node asks for (robopin_ros.runtime.make_executor). rclpy's
        # executor rebuilds its wait set from every entity it holds at each wake-up, in Python: one executor
        # for all nodes (about 280 entities for sim_panda) spent two thirds of the interpreter's busy time at
        # rest doing that, for every joint state and frame of every node.
        self.executors: dict[str, Executor] = {}
        self._spinners: dict[str, threading.Thread] = {}
        self._params_dir: tempfile.TemporaryDirectory | None = None
        self._context_started = False
        self.spin_error: BaseException | None = None
        self._released = threading.Event()  # the planners take tasks (every node ready, the recorder hearing all)
        self._layout_seeded: list[str] = []  # task nodes whose E-TTS seed is the layout's (reseeded on a reset)

    # ------------------------------------------------------------------ life cycle
    def start(self) -> Bringup:
        """Build the simulated scene (if any), create every node and start spinning."""
        import rclpy

        apply_ros_environment()
        system = self.system
        try:
            # The graph is searched while the scene builds: discovery has that long to find another stack.
            probe = GraphProbe(system.namespace)
            try:
                if system.sim is not None:
                    system = self._build_scene(system, probe)
                probe.refuse_other_stack(system)
            finally:
                probe.close()
            self._params_dir = tempfile.TemporaryDirectory(prefix="robopin-up-")
            params = Path(self._params_dir.name) / f"{system.name}.params.yaml"
            params.write_text(yaml.safe_dump(system.ros_parameters_file(), sort_keys=False), encoding="utf-8")
            # The parameters file goes to the context: nodes whose constructors take no options (arm
            # driver, projection) read their parameters from there, matched by node name.
            ros_args = ["robopin_up", "--ros-args", "--params-file", str(params)]
            if system.namespace:
                # A global remap of the context puts every node of this process (the task client too) in the
                # system's namespace, as `ros2 run ... --ros-args -r __ns:=/left` does for one node; the
                # nodes' relative names then resolve under it (robopin.system.names).
                ros_args += ["-r", f"__ns:={system.namespace}"]
            if system.sim is not None and system.namespace:
                # Each simulated stack has a clock of its own: a second one in the domain must not drive this one's.
                ros_args += ["-r", f"/clock:={system.namespace}/clock"]
            if self.log_level:
                ros_args += ["--log-level", self.log_level]
            rclpy.init(args=ros_args, signal_handler_options=SignalHandlerOptions.NO)
            self._context_started = True
            if self.scene is not None:
                self._sim_clock = SimClockPublisher(self.scene.world, self._supervisor_node())
            # Nodes with a slow warm-up (planner start-up, model loading) start before the cameras,
            # whose render or capture threads would otherwise compete with them for the CPU.
            child_args = ros_args[2:]  # the same parameters file, namespace and log level
            for spec in sorted(system.nodes, key=lambda n: _START_ORDER.get(n.executable, 5)):
                if spec.executable in OWN_PROCESS:
                    self.processes[spec.name] = NodeProcess(spec.name, spec.executable, child_args,
                                                            self._ready_client(spec.name))
                    continue
                node = self._create(spec.name, spec.executable)
                if hasattr(node, "hold_tasks"):  # before it spins: no task can come before the stack is ready
                    node.hold_tasks("every node's readiness (recorder, cameras, arm)")
                self.nodes[spec.name] = node
                self._spin_node(spec.name, node)
            if self.want_client:
                self.client = TaskClient(system.views, topics=system.view_topics(), deadman=False)
                self._spin_node("task_client", self.client)
        except BaseException:
            self.close()
            raise
        self.system = system
        threading.Thread(target=self._release_when_ready, name="robopin-up-ready", daemon=True).start()
        return self

    def _release_when_ready(self) -> None:
        """Let the planners take tasks once the stack is ready (the model aside: its absence is a task's
        named failure, vlm_unavailable); until then a task waits, saying what it waits for."""
        while self.nodes or self.processes:
            try:
                waiting = self.not_ready(check_model=False, client=False)
            except Exception:  # the stack is closing under us
                break
            if not waiting:
                break
            for node in list(self.nodes.values()):
                if hasattr(node, "hold_tasks"):
                    node.hold_tasks("; ".join(waiting))
            if self._released.wait(0.1):
                break
        for node in list(self.nodes.values()):
            if hasattr(node, "release_tasks"):
                node.release_tasks()
        self._released.set()

    @property
    def released(self) -> bool:
        """The planners take tasks (the stack was found ready)."""
        return self._released.is_set()

    def _ready_client(self, name: str) -> Any:
        """A client of node ``name``'s ``~/ready`` service, on this process's supervisor node."""
        from std_srvs.srv import Trigger

        return self._supervisor_node().create_client(Trigger, ready_service(name))

    def _supervisor_node(self) -> Node:
        """This process's own node (``robopin_up``): the readiness clients, the simulator's clock."""
        if self._supervisor is None:
            self._supervisor = Node("robopin_up")
            self._supervisor.EXECUTOR_THREADS = 1  # only waits on replies (runtime.make_executor)
            self._spin_node("robopin_up", self._supervisor)
        return self._supervisor

    def bag_roots(self) -> list[Path]:
        """Where the system's recorders write their bags (``output_dir`` of each node that has one)."""
        from robopin.system.node_settings import DEFAULT_OUTPUT_DIR

        roots = [Path(str(node.get_parameter("output_dir").value)) for node in self.nodes.values()
                 if node.has_parameter("output_dir")]
        roots += [Path(str(self.system.node(name).parameters.get("output_dir", DEFAULT_OUTPUT_DIR)))
                  for name, process in self.processes.items() if process.executable == "recorder_node"]
        return roots

    def _build_scene(self, system: SystemFile, probe: GraphProbe) -> SystemFile:
        from robopin.sim.tasks import build_scene

        sim = system.sim
        assert sim is not None
        self.scene = build_scene(system.scenario_path(), sim.seed, world_name=sim.world, robot=system.robot)
        probe.refuse_other_stack(system)  # before a render worker or physics thread starts
        # Every node shares this interpreter, and pybullet keeps the GIL through a render: draw them in a child.
        self.scene.world.start_render_worker(background=True)
        if sim.real_time_factor > 0:
            self.scene.world.start(sim.real_time_factor)
        if sim.ground_truth_calibration:
            calibrations = sim_calibrations(self.scene, system.views)
            for projection in system.nodes_running("projection_node"):
                system = system.with_parameters(projection.name, calibrations=calibrations)
        # E-TTS without a seed of its own draws from the layout seed: a layout errs the same way on a kept
        # stack as on a fresh one, and runs the same again.
        seeded = system.with_layout_seeded_reasoner()
        self._layout_seeded = [spec.name for spec in seeded.nodes if spec != system.node(spec.name)]
        return seeded

    def reset_scene(self, seed: int, scenario: str | None = None) -> None:
        """Lay the simulated cell out again with ``seed`` (and ``scenario``, one with the same cameras; default: the
        running one) and tell the nodes the trial boundary: what a fresh bring-up with them would give, without one
        (a batch runs its trials on one stack).

        As an operator resets a real cell between trials: the arm must be idle, the objects are laid out anew
        (:func:`robopin.sim.tasks.reset_scene`: the same layout, bodies and physics as a fresh world), the arm
        waits at the observation pose. Then each node that keeps state of the scene starts over: the task
        node's model backend is built again (its simulated errors drawn for this layout, E-TTS following the
        layout seed reseeded) and frames taken before the reset are stale to it; the motion planner takes no
        cloud captured before the reset. The recorder opens a bag per task anyway.
        """
        from robopin.sim.tasks import LayoutError, ScenarioError, reset_scene

        if self.scene is None or self.system.sim is None:
            raise BringupError(f"system {self.system.name!r} has no simulated scene to reset")
        busy = [f"{name}: {', '.join(node.busy())}" for name, node in self.nodes.items()
                if callable(getattr(node, "busy", None)) and node.busy()]
        if busy:
            raise BringupError(f"cannot reset the scene while goals run ({'; '.join(busy)})")
        world = self.scene.world
        # Stepped only by the layout's own settling while it is built, as a fresh world is: the same rest poses.
        rate = world.real_time_factor if world.running else None
        scenario = scenario or self.system.sim.scenario
        system = self.system.with_sim(scenario=scenario, seed=int(seed))
        world.stop()
        try:
            self.scene = reset_scene(self.scene, seed, system.scenario_path())
        except (ScenarioError, LayoutError) as error:
            raise BringupError(f"cannot reset the scene to {scenario} seed {seed}: {error}") from error
        finally:
            if rate is not None:
                world.start(rate)
        # The nodes' clock (/clock), as a stamp reads: the layout's settling moved it past every frame and state of
        # the old layout, and the new layout's first frames carry exactly this time.
        from robopin_ros.conversions import seconds_to_stamp, stamp_to_seconds

        reset_at_s = stamp_to_seconds(seconds_to_stamp(world.sim_time_s))
        for name in self._layout_seeded:
            reasoning = dict(system.node(name).parameters["reasoning"])
            reasoning["reasoner"] = {**reasoning["reasoner"], "seed": int(seed)}
            system = system.with_parameters(name, reasoning=reasoning)
        self.system = system
        for name, node in self.nodes.items():
            if callable(getattr(node, "new_scene", None)):
                node.new_scene(reset_at_s, layout_seed=int(seed) if name in self._layout_seeded else None)
        logger.info("scene reset: %s seed %d", scenario, seed)

    def _create(self, name: str, executable: str) -> Node:
        cls = node_class(executable)
        try:
            if _accepts_node_options(cls):
                node = cls(cli_args=["--ros-args", "-r", f"__node:={name}"])
            else:
                node = cls()
        except (SystemFileError, BringupError):
            raise
        except Exception as error:  # a missing backend, an unreachable device, a bad parameter value
            raise NodeStartError(name, executable, error) from error
        if node.get_name() != name:
            actual = node.get_name()
            node.destroy_node()
            raise SystemFileError(f"node {name!r}: {cls.__name__} always names itself {actual!r}; use that name "
                                  "in the system file")
        node = refuse_undeclared_parameters(node)  # a parameter it does not declare: refused, the node destroyed
        logger.info("started %s (%s)", name, executable)
        return node

    def _spin_node(self, name: str, node: Node) -> None:
        executor = make_executor(node, self.threads)
        executor.add_node(node)
        self.executors[name] = executor
        spinner = threading.Thread(target=self._spin, args=(name, executor), name=f"robopin-up-{name}", daemon=True)
        self._spinners[name] = spinner
        spinner.start()

    def _spin(self, name: str, executor: Executor) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            executor.spin()
        except ExternalShutdownException:
            pass
        except BaseException as error:  # reported by whoever waits on the stack
            logger.exception("the executor of %s in %s stopped", name, self.system.name)
            self.spin_error = error

    @property
    def _spinning(self) -> bool:
        return bool(self._spinners) and all(spinner.is_alive() for spinner in self._spinners.values())

    @property
    def running(self) -> bool:
        """Every node spinning and every node process alive (a process that ended is the stack's error)."""
        for name, process in self.processes.items():
            code = process.exit_code()
            if code is not None:
                if self.spin_error is None:
                    self.spin_error = BringupError(f"node {name!r} (process {process.pid}) exited with code {code}")
                return False
        return self._spinning

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Wait until every arm is connected and enabled, every camera has published a frame, the recorder
        has heard every camera topic and the planners take tasks."""
        deadline = time.monotonic() + timeout_s
        while True:
            waiting = self.not_ready()
            if not waiting and not self._released.wait(max(0.0, min(1.0, deadline - time.monotonic()))):
                waiting = ["the planners do not take tasks yet"]
            if not waiting:
                return
            if not self.running and isinstance(self.spin_error, BringupError):  # a node process ended
                raise self.spin_error
            if self.spin_error is not None:
                raise BringupError(f"the executor stopped: {self.spin_error!r}")
            if time.monotonic() > deadline:
                raise BringupError(f"not ready after {timeout_s:.0f} s: {'; '.join(waiting)}")
            time.sleep(0.1)

    def not_ready(self, *, check_model: bool | None = None, client: bool = True) -> list[str]:
        """What is still starting, by node (empty when the stack is ready for a task)."""
        check_model = self.check_model if check_model is None else check_model
        waiting = []
        for name, node in self.nodes.items():
            if callable(getattr(node, "not_ready", None)):  # its own readiness: arm enabled, a frame, topics heard
                waiting += [f"{name}: {reason}" for reason in node.not_ready()]
            model = node.model_not_ready() if check_model and hasattr(node, "model_not_ready") else ""
            if model:
                waiting.append(f"{name}: {model}")
        for name, process in self.processes.items():
            waiting += [f"{name}: {reason}" for reason in process.not_ready()]
        if client and self.client is not None:
            waiting += self.client.not_ready()
        return waiting

    def close(self) -> None:
        """Stop the arm, end running goals, then stop spinning and destroy the nodes (recorder last).

        Everything that must reach a client or the bag (the arm at rest, each goal's final status, the
        bag's end) happens while the executor still spins; see :func:`robopin_ros.runtime.stop_nodes`.
        """
        self._released.set()
        if self.executors and self._spinning and self.nodes:
            stop_nodes(self.nodes.values())
        # Node processes next, while this process still spins (the recorder fetches the goals' results from it),
        # the recorder last so its bag holds the others' ends.
        executables = {spec.name: spec.executable for spec in self.system.nodes}
        order = sorted(self.processes.values(), key=lambda p: _DESTROY_ORDER.get(executables.get(p.name, ""), 5))
        last = [p for p in order if p.executable == "recorder_node"]
        first = [p for p in order if p not in last]
        for process in first:
            process.signal()
        for process in first + last:
            process.stop()
        deadline = time.monotonic() + 10.0
        unfinished = [name for name, executor in self.executors.items()
                      if not shutdown_executor(executor, self._spinners.get(name),
                                               timeout_s=max(0.5, deadline - time.monotonic()))]
        # A node is destroyed only once nothing of its executor runs (runtime.executor_threads_running): on a
        # starved machine the shared 10 s can end with a spin thread still waking; it gets longer, and a node whose
        # executor never ends is left to the process's exit. The context is shut down all the same, so that a
        # batch's next stack can start in this process.
        grace_end = time.monotonic() + _STOP_GRACE_S
        kept = set()
        for name in unfinished:
            running = executor_threads_running(self.executors[name], self._spinners.get(name),
                                               max(0.0, grace_end - time.monotonic()))
            if running:
                logger.error("not destroying node %s: its executor still runs (%s)", name, ", ".join(running))
                kept.add(name)
        nodes = sorted(self.nodes.items(), key=lambda item: _DESTROY_ORDER.get(executables.get(item[0], ""), 5))
        client = [self.client] if self.client is not None and "task_client" not in kept else []
        nodes = client + [node for name, node in nodes if name not in kept]
        if self._supervisor is not None and "robopin_up" not in kept:
            nodes.append(self._supervisor)
        if self._sim_clock is not None:  # the nodes' last stamps were taken: the cell's clock stops with them
            self._sim_clock.close()
            self._sim_clock = None
        for node in nodes:
            try:
                node.destroy_node()
            except Exception as error:  # one node failing to stop must not keep the others running
                logger.warning("destroying %s failed: %r", node.get_name(), error)
        self.nodes, self.client, self.executors, self._spinners = {}, None, {}, {}
        self.processes, self._supervisor = {}, None
        if self._context_started:
            end_context()
            self._context_started = False
        if self.scene is not None:
            self.scene.close()
            self.scene = None
        if self._params_dir is not None:
            self._params_dir.cleanup()
            self._params_dir = None

    def __enter__(self) -> Bringup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def spin_until_signal(bringup: Bringup, stop: threading.Event | None = None, *, watchdog: bool = True) -> int:
    """Keep a started system running until Ctrl-C, SIGTERM or ``stop``; return an exit code.

    From the signal on, the process has :data:`~robopin_ros.runtime.SHUTDOWN_EXIT_S` to exit
    (``watchdog``); the caller's ``Bringup.close`` stops the arm first.
    """
    stop = stop or threading.Event()
    with stop_signals(lambda _signum: stop.set()):
        while not stop.wait(0.2):
            if not bringup.running:
                break
    if stop.is_set() and watchdog:
        logger.info("stop requested: stopping the arm, ending running goals, closing the recorder")
        exit_watchdog()
    if bringup.spin_error is not None:
        raise bringup.spin_error
    return 0
