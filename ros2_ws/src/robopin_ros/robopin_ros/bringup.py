"""The in-process runner: every node of a system file in one MultiThreadedExecutor, plus a task client.

``robopin up`` uses this where the ``ros2`` CLI and launch are absent (CI, this machine kind) and for
simulated systems everywhere (the pybullet world the sim camera, arm and oracle backends share lives
in one process). :class:`Bringup` builds the simulated scene when the system has one, writes the
system's parameters to a ROS 2 parameters file handed to the context (so each node reads exactly what
``ros2 launch`` would give it), creates the nodes and spins them; :func:`spin_until_signal` waits for
Ctrl-C or SIGTERM with our own handlers, as :mod:`robopin_ros.runtime` does for a single node.
:class:`TaskClient` issues an instruction through the ``Instruct`` service and follows the task it
started on the ExecuteTask action's topics. :func:`run_trial` does one recorded, judged trial.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import logging
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from action_msgs.msg import GoalStatus, GoalStatusArray
from action_msgs.srv import CancelGoal
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_action_status_default
from rclpy.signals import SignalHandlerOptions
from robopin_interfaces.action import ExecuteTask
from robopin_interfaces.srv import Instruct
from sensor_msgs.msg import Image
from visualization_msgs.msg import MarkerArray

from robopin.env import apply_ros_environment
from robopin.system import SystemFile, SystemFileError
from robopin.system.timing import FeedbackEvent, StepTiming, step_timings
from robopin.trials.results import reasoning_measures
from robopin_ros import conversions

logger = logging.getLogger(__name__)

__all__ = ["Bringup", "BringupError", "CancelOutcome", "NodeStartError", "TaskClient", "TaskRun", "TrialOutcome",
           "cancel_running_tasks", "instruct_running_stack", "run_trial", "spin_until_signal"]

_TERMINAL = {GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED}
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_START_ORDER = {"motion_planner_node": 0, "planner_node": 1, "projection_node": 2, "arm_driver_node": 3,
                "state_publisher_node": 4, "recorder_node": 4, "camera_node": 6}
# Nodes are destroyed in this order once every goal has ended (runtime.stop_nodes): the task layers
# first, the cameras, then the arm's connection, the recorder last so the bag holds the stop.
_DESTROY_ORDER = {"planner_node": 0, "motion_planner_node": 1, "calibration_node": 2, "projection_node": 3,
                  "camera_node": 4, "replay_node": 5, "arm_driver_node": 6,
                  "state_publisher_node": 7, "recorder_node": 9}


class BringupError(RuntimeError):
    """The system could not be brought up (a node failed to start or never became ready)."""


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


class Bringup:
    """All nodes of ``system`` in this process (see the module docstring). Use as a context manager."""

    def __init__(self, system: SystemFile, *, threads: int = 10, client: bool = True, log_level: str = "",
                 check_model: bool = True) -> None:
        self.system = system
        self.check_model = check_model  # readiness includes the VLM server serving its model
        self.log_level = log_level  # ROS log level of every node ("warn" keeps a demo's output short)
        self.threads = threads
        self.want_client = client
        self.scene: Any = None
        self.nodes: dict[str, Node] = {}
        self.client: TaskClient | None = None
        self.executor: MultiThreadedExecutor | None = None
        self._spinner: threading.Thread | None = None
        self._params_dir: tempfile.TemporaryDirectory | None = None
        self._context_started = False
        self.spin_error: BaseException | None = None

    # ------------------------------------------------------------------ life cycle
    def start(self) -> Bringup:
        """Build the simulated scene (if any), create every node and start spinning."""
        import rclpy

        apply_ros_environment()
        system = self.system
        try:
            if system.sim is not None:
                system = self._build_scene(system)
            self._params_dir = tempfile.TemporaryDirectory(prefix="robopin-up-")
            params = Path(self._params_dir.name) / f"{system.name}.params.yaml"
            params.write_text(yaml.safe_dump(system.ros_parameters_file(), sort_keys=False), encoding="utf-8")
            # The parameters file goes to the context: nodes whose constructors take no options (arm
            # driver, projection) read their parameters from there, matched by node name.
            ros_args = ["robopin_up", "--ros-args", "--params-file", str(params)]
            if self.log_level:
                ros_args += ["--log-level", self.log_level]
            rclpy.init(args=ros_args, signal_handler_options=SignalHandlerOptions.NO)
            self._context_started = True
            self.executor = MultiThreadedExecutor(num_threads=self.threads)
            # Nodes with a slow warm-up (planner start-up, model loading) start before the cameras,
            # whose render or capture threads would otherwise compete with them for the CPU.
            for spec in sorted(system.nodes, key=lambda n: _START_ORDER.get(n.executable, 5)):
                self.nodes[spec.name] = self._create(spec.name, spec.executable)
                self.executor.add_node(self.nodes[spec.name])
            if self.want_client:
                self.client = TaskClient(system.views)
                self.executor.add_node(self.client)
            self._spinner = threading.Thread(target=self._spin, name="robopin-up-executor", daemon=True)
            self._spinner.start()
        except BaseException:
            self.close()
            raise
        self.system = system
        return self

    def _build_scene(self, system: SystemFile) -> SystemFile:
        from robopin.sim.tasks import build_scene

        sim = system.sim
        assert sim is not None
        self.scene = build_scene(system.scenario_path(), sim.seed, world_name=sim.world, robot=system.robot)
        if sim.real_time_factor > 0:
            self.scene.world.start(sim.real_time_factor)
        if sim.ground_truth_calibration:
            calibrations = sim_calibrations(self.scene, system.views)
            for projection in system.nodes_running("projection_node"):
                system = system.with_parameters(projection.name, calibrations=calibrations)
        return system

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
        logger.info("started %s (%s)", name, executable)
        return node

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            self.executor.spin()
        except ExternalShutdownException:
            pass
        except BaseException as error:  # reported by whoever waits on the stack
            logger.exception("the executor of %s stopped", self.system.name)
            self.spin_error = error

    @property
    def running(self) -> bool:
        return self._spinner is not None and self._spinner.is_alive()

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Wait until every arm is connected and enabled and every camera has published a frame."""
        deadline = time.monotonic() + timeout_s
        while True:
            waiting = self.not_ready()
            if not waiting:
                return
            if self.spin_error is not None:
                raise BringupError(f"the executor stopped: {self.spin_error!r}")
            if time.monotonic() > deadline:
                raise BringupError(f"not ready after {timeout_s:.0f} s: {'; '.join(waiting)}")
            time.sleep(0.1)

    def not_ready(self) -> list[str]:
        """What is still starting, by node (empty when the stack is ready for a task)."""
        waiting = []
        for name, node in self.nodes.items():
            arm = getattr(node, "arm", None)
            if arm is not None and not (arm.is_connected and arm.is_enabled):
                waiting.append(f"{name}: arm not connected/enabled ({getattr(node, 'last_error', '') or 'starting'})")
            if hasattr(node, "frames_published") and node.frames_published == 0:
                waiting.append(f"{name}: no camera frame yet ({getattr(node, 'last_error', '') or 'starting'})")
            if hasattr(node, "recorder"):  # recorder_node: every camera heard, so the first step's frames are kept
                waiting += [f"{name}: {reason}" for reason in node.not_ready()]
            model = node.model_not_ready() if self.check_model and hasattr(node, "model_not_ready") else ""
            if model:
                waiting.append(f"{name}: {model}")
        if self.client is not None:
            waiting += self.client.not_ready()
        return waiting

    def close(self) -> None:
        """Stop the arm, end running goals, then stop spinning and destroy the nodes (recorder last).

        Everything that must reach a client or the bag (the arm at rest, each goal's final status, the
        bag's end) happens while the executor still spins; see :func:`robopin_ros.runtime.stop_nodes`.
        """
        import rclpy

        from robopin_ros.runtime import stop_nodes

        if self.executor is not None and self.running and self.nodes:
            stop_nodes(self.nodes.values())
        if self.executor is not None:
            self.executor.shutdown(timeout_sec=5.0)
        if self._spinner is not None:
            self._spinner.join(timeout=10.0)
        executables = {spec.name: spec.executable for spec in self.system.nodes}
        nodes = sorted(self.nodes.items(), key=lambda item: _DESTROY_ORDER.get(executables.get(item[0], ""), 5))
        nodes = ([self.client] if self.client is not None else []) + [node for _, node in nodes]
        for node in nodes:
            try:
                node.destroy_node()
            except Exception as error:  # one node failing to stop must not keep the others running
                logger.warning("destroying %s failed: %r", node.get_name(), error)
        self.nodes, self.client, self.executor, self._spinner = {}, None, None, None
        if self._context_started:
            rclpy.try_shutdown()
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
    from robopin_ros.runtime import exit_watchdog

    stop = stop or threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
    try:
        while not stop.wait(0.2):
            if not bringup.running:
                break
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop.is_set() and watchdog:
        logger.info("stop requested: stopping the arm, ending running goals, closing the recorder")
        exit_watchdog()
    if bringup.spin_error is not None:
        raise bringup.spin_error
    return 0


# ---------------------------------------------------------------------------------------------------
# Issuing a task and following it
# ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class TaskRun:
    """What a client saw of one task: the Instruct answer, every feedback, the result, the views."""

    instruction: str
    accepted: bool = False
    task_id: str = ""
    message: str = ""
    goal_id: bytes = b""
    events: list[FeedbackEvent] = dataclasses.field(default_factory=list)
    start_s: float = 0.0
    end_s: float = 0.0
    result: Any = None
    timed_out: bool = False
    interrupted: bool = False  # the client stopped the task (Ctrl-C or SIGTERM on `robopin instruct`)
    views: dict[int, dict[str, np.ndarray]] = dataclasses.field(default_factory=dict)
    # step -> the 3D targets projection drew for it (its last ProjectPoints call), see marker_array_to_targets
    targets: dict[int, list[dict]] = dataclasses.field(default_factory=dict)

    @property
    def success(self) -> bool:
        return bool(self.result is not None and self.result.success)

    @property
    def reason(self) -> str:
        """Why the task failed, by name (empty on success)."""
        if not self.accepted:
            return "instruct_rejected"
        if self.timed_out:
            return "task_timeout"
        if self.interrupted and self.result is None:
            return "canceled"
        if self.result is None:
            return "no_result"
        return "" if self.result.success else (self.result.reason or "task_failed")

    def timings(self) -> list[StepTiming]:
        """Per-step stage durations from the feedback, with each step's model time."""
        model = {}
        for message in (self.result.reasoning_steps if self.result is not None else []):
            model[int(message.step)] = model.get(int(message.step), 0.0) + float(message.generation_time_s)
        return step_timings(self.events, self.start_s, self.end_s or time.monotonic(), model)


def _rgb(msg: Image) -> np.ndarray | None:
    if msg.encoding not in ("rgb8", "bgr8"):
        return None
    image = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step // 3, 3)[:, : msg.width]
    return np.ascontiguousarray(image[..., ::-1] if msg.encoding == "bgr8" else image)


class TaskClient(Node):
    """Calls ``/robopin/instruct`` and follows the ExecuteTask goal it starts (feedback, status, result)."""

    def __init__(self, views: Sequence[str], **node_options: Any) -> None:
        super().__init__("robopin_task_client", **node_options)
        self.views = tuple(views)
        self._lock = threading.Lock()
        self._latest: dict[str, Image] = {}
        self._statuses: dict[bytes, int] = {}
        self._run: TaskRun | None = None
        self._unclaimed: list[tuple[bytes, FeedbackEvent]] = []
        self.instruct_client = self.create_client(Instruct, "/robopin/instruct")
        self.result_client = self.create_client(ExecuteTask.Impl.GetResultService,
                                                "/robopin/execute_task/_action/get_result")
        self.cancel_client = self.create_client(CancelGoal, "/robopin/execute_task/_action/cancel_goal")
        self.create_subscription(ExecuteTask.Impl.FeedbackMessage, "/robopin/execute_task/_action/feedback",
                                 self._on_feedback, 50)
        # The action server's own status QoS (transient local): a client started mid-task (`robopin cancel`)
        # gets the current statuses at once.
        self.status_sub = self.create_subscription(GoalStatusArray, "/robopin/execute_task/_action/status",
                                                   self._on_status, qos_profile_action_status_default)
        self.status_received = threading.Event()
        for view in self.views:
            self.create_subscription(Image, f"/cameras/{view}/color/image_raw",
                                     lambda msg, v=view: self._on_image(v, msg), 2)
        self.create_subscription(MarkerArray, "/robopin/targets/markers", self._on_targets, 10)

    def not_ready(self) -> list[str]:
        """Services and camera images this client still waits for."""
        waiting = []
        if not self.instruct_client.service_is_ready():
            waiting.append("/robopin/instruct not available yet")
        with self._lock:
            missing = [v for v in self.views if v not in self._latest]
        if missing:
            waiting.append(f"no image received yet from view(s) {missing}")
        return waiting

    def _on_image(self, view: str, msg: Image) -> None:
        """Keep the newest color image of a view (what the planner is about to see)."""
        with self._lock:
            self._latest[view] = msg

    def _on_targets(self, msg: MarkerArray) -> None:
        """Keep where the projection put the current step's pinned points (the trial log shows them)."""
        targets = conversions.marker_array_to_targets(msg)
        with self._lock:
            run = self._run
            if run is not None and run.events:
                run.targets[run.events[-1].step] = targets

    def _on_status(self, msg: GoalStatusArray) -> None:
        """Record the status of every goal, and learn the full id of ours."""
        self.status_received.set()
        with self._lock:
            for status in msg.status_list:
                goal_id = bytes(status.goal_info.goal_id.uuid)
                self._statuses[goal_id] = status.status
                run = self._run
                if run is not None and not run.goal_id and run.task_id and goal_id.hex().startswith(run.task_id):
                    run.goal_id = goal_id

    def _on_feedback(self, msg: ExecuteTask.Impl.FeedbackMessage) -> None:
        """Timestamp our task's feedback; keep the views the planner reasons on at each step."""
        received = time.monotonic()
        goal_id = bytes(msg.goal_id.uuid)
        feedback = msg.feedback
        step = int(feedback.step)
        event = FeedbackEvent(received, feedback.stage, step, feedback.detail)
        with self._lock:
            run = self._run
            if run is None:
                return
            if not run.task_id:
                # The task's first feedback can arrive before the Instruct answer naming its id.
                self._unclaimed.append((goal_id, event))
            elif goal_id.hex().startswith(run.task_id):
                run.goal_id = run.goal_id or goal_id
                run.events.append(event)
            else:
                return
            # The planner runs one task at a time (single-goal policy), so these are our task's views.
            grab = feedback.stage == "reasoning" and step not in run.views
            if grab:
                run.views[step] = {}
                latest = dict(self._latest)
        if grab:
            # Decoded outside the lock: copying two 640x480 images must not delay status handling.
            images = {v: _rgb(m) for v, m in latest.items()}
            run.views[step] = {v: img for v, img in images.items() if img is not None}

    def run(self, instruction: str, *, mode: str = "", dry_run: bool = False, max_steps: int = 0,
            timeout_s: float = 600.0, on_event: Callable[[FeedbackEvent], None] | None = None,
            stop: threading.Event | None = None) -> TaskRun:
        """Instruct, then wait for the task's result; cancel it after ``timeout_s`` or when ``stop`` is set.

        The Instruct answer names the task's ExecuteTask goal, so a timeout or a stop at any moment
        after it cancels that goal (the planner stops the arm) and waits for its final status.
        """
        run = TaskRun(instruction)
        if not self.instruct_client.wait_for_service(timeout_sec=30.0):
            run.message = "service /robopin/instruct is not available"
            return run
        with self._lock:
            self._run = run
            self._unclaimed.clear()
        run.start_s = time.monotonic()
        request = Instruct.Request(instruction=instruction, mode=mode, dry_run=dry_run, max_steps=max_steps)
        # A stop before the answer still waits for it: the service answers at once, and only the answer
        # names the goal to cancel.
        response = _wait_future(self.instruct_client.call_async(request), 30.0)
        if response is None:
            run.message = "/robopin/instruct did not answer within 30 s"
            return run
        with self._lock:
            run.accepted, run.task_id, run.message = response.accepted, response.task_id, response.message
            goal_id = bytes(response.goal_id.uuid)
            run.goal_id = goal_id if any(goal_id) else run.goal_id
            early = [(g, e) for g, e in self._unclaimed if run.task_id and g.hex().startswith(run.task_id)]
            self._unclaimed.clear()
            if early:
                run.goal_id = run.goal_id or early[0][0]
                run.events[:0] = [e for _, e in early]
        if not run.accepted:
            run.end_s = time.monotonic()
            return run
        deadline = run.start_s + timeout_s
        seen = 0
        while True:
            with self._lock:
                events = run.events[seen:]
                seen = len(run.events)
                status = self._statuses.get(run.goal_id) if run.goal_id else None
            for event in events:
                if on_event is not None:
                    on_event(event)
            if status in _TERMINAL:
                break
            if stop is not None and stop.is_set():
                run.interrupted = True
                self.cancel(run)
                break
            if time.monotonic() >= deadline:
                run.timed_out = True
                self.cancel(run)
                break
            time.sleep(0.05)
        run.end_s = time.monotonic()
        if run.goal_id:
            request = ExecuteTask.Impl.GetResultService.Request()
            request.goal_id.uuid = list(run.goal_id)
            answer = _wait_future(self.result_client.call_async(request), 60.0)
            run.result = None if answer is None else answer.result
        with self._lock:
            self._run = None
        return run

    def cancel(self, run: TaskRun, wait_s: float = 30.0) -> bool:
        """Cancel the run's goal (the planner stops the arm); True once it reached a final status."""
        if not run.goal_id:
            return False
        request = CancelGoal.Request()
        request.goal_info.goal_id.uuid = list(run.goal_id)
        _wait_future(self.cancel_client.call_async(request), 10.0)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with self._lock:
                if self._statuses.get(run.goal_id) in _TERMINAL:
                    return True
            time.sleep(0.02)
        return False

    def running_goals(self) -> list[bytes]:
        """Goal ids of the tasks the status topic reports as not yet finished."""
        with self._lock:
            return [goal for goal, status in self._statuses.items() if status not in _TERMINAL]

    def status_of(self, goal_id: bytes) -> int | None:
        with self._lock:
            return self._statuses.get(goal_id)


def instruct_running_stack(instruction: str, *, views: Sequence[str] = ("static", "wrist"), mode: str = "",
                           dry_run: bool = False, max_steps: int = 0, timeout_s: float = 600.0,
                           wait_s: float = 30.0, on_event: Callable[[FeedbackEvent], None] | None = None,
                           stop: threading.Event | None = None) -> TaskRun:
    """From a process of its own: instruct a stack running elsewhere in this ROS domain and follow the task.

    Setting ``stop`` (the CLI does on Ctrl-C and SIGTERM) cancels the task this call started.
    """
    with _client_process(views) as client:
        if not client.instruct_client.wait_for_service(timeout_sec=wait_s):
            run = TaskRun(instruction)
            run.message = f"no /robopin/instruct service within {wait_s:.0f} s: is a stack running in this ROS domain?"
            return run
        return client.run(instruction, mode=mode, dry_run=dry_run, max_steps=max_steps, timeout_s=timeout_s,
                          on_event=on_event, stop=stop)


@dataclasses.dataclass
class CancelOutcome:
    """What ``robopin cancel`` did: the tasks it asked to cancel and the final status each reached."""

    requested: list[str]
    final: dict[str, str]
    message: str = ""


_STATUS_NAMES = {GoalStatus.STATUS_SUCCEEDED: "succeeded", GoalStatus.STATUS_CANCELED: "canceled",
                 GoalStatus.STATUS_ABORTED: "aborted"}


def cancel_running_tasks(task_id: str = "", *, wait_s: float = 10.0, discover_s: float = 10.0) -> CancelOutcome:
    """From a process of its own: cancel the running task ``task_id`` (a prefix of its id), or every one.

    The planner stops the arm before the goal ends ``canceled``. Waits up to ``wait_s`` for each final status.
    """
    with _client_process(()) as client:
        if not client.cancel_client.wait_for_service(timeout_sec=discover_s):
            return CancelOutcome([], {}, "no /robopin/execute_task action server: is a stack running in this ROS "
                                         "domain?")
        # The server's latched status arrives once the subscription has matched its publisher (slow on a busy
        # machine); a server that never ran a goal has published none, hence the short wait after matching.
        deadline = time.monotonic() + discover_s
        while client.status_sub.get_publisher_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        client.status_received.wait(timeout=max(0.0, min(2.0, deadline - time.monotonic())))
        goals = [g for g in client.running_goals() if g.hex().startswith(task_id.lower())]
        if not goals:
            which = f"task {task_id!r}" if task_id else "task"
            return CancelOutcome([], {}, f"no running {which}")
        final = {}
        for goal in goals:
            run = TaskRun("", accepted=True, task_id=goal.hex()[:8], goal_id=goal)
            client.cancel(run, wait_s=wait_s)
            status = client.status_of(goal)
            final[goal.hex()[:8]] = _STATUS_NAMES.get(status, "still running")
        return CancelOutcome([g.hex()[:8] for g in goals], final)


@contextlib.contextmanager
def _client_process(views: Sequence[str]) -> Iterator[TaskClient]:
    """rclpy context, a TaskClient and its spinning executor for a CLI process; all closed on exit."""
    import rclpy

    apply_ros_environment()
    rclpy.init(args=["robopin_client"], signal_handler_options=SignalHandlerOptions.NO)
    client = TaskClient(views)
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(client)
    spinner = threading.Thread(target=executor.spin, name="robopin-client", daemon=True)
    spinner.start()
    try:
        yield client
    finally:
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5.0)
        client.destroy_node()
        rclpy.try_shutdown()


def _wait_future(future, timeout_s: float):
    """Result of an rclpy future spun by the executor's threads, or None after ``timeout_s``."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout_s):
        return None
    return future.result()


# ---------------------------------------------------------------------------------------------------
# One recorded, judged trial
# ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class TrialOutcome:
    """The verdict on one trial, the task as the client saw it, and where its files are."""

    trial_id: str
    success: bool
    failure: str
    detail: str
    run: TaskRun
    folder: Path
    bag: Path | None
    timings: list[StepTiming]
    duration_s: float


def run_trial(bringup: Bringup, root: str | Path, trial_id: str, *, method: str = "",
              on_event: Callable[[FeedbackEvent], None] | None = None,
              ready_timeout_s: float = 180.0, prepare: Callable[[], None] | None = None,
              judge: Callable[[Any], Any] | None = None, task: str = "", instruction: str = "") -> TrialOutcome:
    """Give a started system's task through Instruct, judge it, and write the trial log and bag.

    ``prepare()`` runs once the stack is ready, before the instruction (the operator's scene set-up);
    ``task`` and ``instruction`` name a real cell's scenario (a sim system takes both from its scene).
    The stack's own verdict (its task result and, in simulation, the scenario's success check on the
    final world) is written to ``stack.json`` first; then ``judge(verdict)`` returns the
    :class:`robopin.trials.judging.Judgement` the trial counts by (default: the simulator's,
    :func:`~robopin.trials.judging.sim_judgement`: the planner's named reason, ``task_timeout``,
    ``instruct_rejected``, ``not_ready`` or ``goal_not_met``). The recorder's bag of the task is moved
    into the trial folder.
    """
    from robopin.sim.tasks import check_success
    from robopin.trials.judging import StackVerdict, finish_judged_trial, sim_judgement, write_stack_verdict
    from robopin.trials.log import TrialLog

    started = time.monotonic()
    system = bringup.system
    log = TrialLog(root, trial_id)
    instruction = instruction or system.task.instruction
    task_name = task or system.name
    if bringup.scene is not None:
        instruction = instruction or bringup.scene.spec.instruction
        task_name = bringup.scene.spec.name
    run = TaskRun(instruction)
    failure, detail, world = "", "", None
    try:
        bringup.wait_ready(ready_timeout_s)
        if prepare is not None:
            prepare()
        assert bringup.client is not None, "run_trial needs a Bringup with its task client"
        run = bringup.client.run(instruction, mode=system.task.mode, dry_run=system.task.dry_run,
                                 max_steps=system.task.max_steps, timeout_s=system.task.timeout_s, on_event=on_event)
        failure = run.reason
        detail = run.message if run.result is None else run.result.message
        if bringup.scene is not None and not system.task.dry_run:
            bringup.scene.world.settle(1.0)
            world = check_success(bringup.scene)
    except BringupError as error:
        failure, detail = "not_ready", str(error)
    bag = _collect_bag(bringup, run.task_id, log.folder) if run.task_id else None
    timings = run.timings() if run.start_s else []
    world_failed = world is not None and not world.success
    _write_steps(log, run, timings, failure or ("goal_not_met" if world_failed else ""), dry_run=system.task.dry_run)
    stack = StackVerdict(
        success=not failure, failure=failure, detail=detail, task_id=run.task_id,
        steps_executed=int(run.result.steps_executed) if run.result is not None else 0,
        world_success=None if world is None else world.success, world_detail="" if world is None else str(world),
        goals_reached=None if world is None else sum(g.ok for g in world.goals),
        goals_total=None if world is None else len(world.goals))
    summary = dict(
        trial_id=trial_id, task=task_name, method=method or system.name,
        steps=len(run.result.reasoning_steps) if run.result is not None else 0, duration_s=time.monotonic() - started,
        instruction=instruction, bag=str(bag.relative_to(log.folder)) if bag is not None else "",
        extra={"system": system.name, "robot": system.robot, "task_id": run.task_id,
               "scenario": system.sim.scenario if system.sim else "", "seed": system.sim.seed if system.sim else None,
               "timings": [t.as_dict() for t in timings],
               "reasoning": [reasoning_measures(m) for m in (run.result.reasoning_steps if run.result else ())]})
    # Kept before anyone is asked: a batch stopped while the operator judges loses nothing (--resume asks again).
    write_stack_verdict(log.folder, stack, summary=summary)
    judgement = (judge or sim_judgement)(stack)
    result = finish_judged_trial(log.folder, judgement)
    return TrialOutcome(trial_id, result.success, result.failure, str(result.extra.get("detail", "")), run,
                        log.folder, bag, timings, time.monotonic() - started)


def _collect_bag(bringup: Bringup, task_id: str, folder: Path, timeout_s: float = 20.0) -> Path | None:
    """Move the recorder's bag of ``task_id`` into ``folder`` once the recorder has closed it."""
    roots = [Path(str(node.get_parameter("output_dir").value)) for node in bringup.nodes.values()
             if node.has_parameter("output_dir")]
    deadline = time.monotonic() + timeout_s
    while roots and time.monotonic() < deadline:
        for root in roots:
            for bag in sorted(root.glob(f"task-{task_id}*")):
                if (bag / "metadata.yaml").is_file():  # written when the bag is closed
                    target = folder / bag.name
                    if bag.resolve() != target.resolve():
                        bag.rename(target)
                    return target
        time.sleep(0.2)
    return None


def _write_steps(log: Any, run: TaskRun, timings: list[StepTiming], failure: str, *, dry_run: bool) -> None:
    """One trial-log step per reasoning step: views, PinCoT text and parse, errors, stage timing."""
    from robopin.pincot import parse
    from robopin.trials.log import TrialStep, trace_to_json

    messages = list(run.result.reasoning_steps) if run.result is not None else []
    by_step = {t.step: t for t in timings}
    for index, message in enumerate(messages):
        step = int(message.step)
        images = run.views.get(step, {})
        sizes = [(img.shape[1], img.shape[0]) for img in images.values()] or None
        trace = parse(message.raw_text, len(list(message.view_names)) or 2) if message.raw_text else None
        timing = by_step.get(step, StepTiming(step))
        last = index == len(messages) - 1
        log.add_step(TrialStep(
            step=step, instruction=message.instruction or run.instruction,
            views={view: log.save_view(step, view, image) for view, image in images.items()},
            raw_output=message.raw_text, trace=trace_to_json(trace, sizes) if trace is not None else {},
            errors=[f"{e.code}: {e.message}" for e in message.errors],
            targets=list(run.targets.get(step, [])),
            planner_status=(failure or "success") if last else "success",
            planning_time_s=timing.durations_s.get("plan", 0.0),
            execution="dry_run" if dry_run else ("executed" if "execute" in timing.durations_s else ""),
            durations_s=dict(timing.durations_s), stage_starts_s=dict(timing.starts_s), model=message.model))
