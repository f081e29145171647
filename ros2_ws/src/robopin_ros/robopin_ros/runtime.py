"""How every robopin node process starts and stops: one place for init, spin and clean shutdown.

Use from a node module::

    def main(args=None):
        return run_node(CameraNode, args)

The executor spins in a worker thread while the main thread waits for SIGINT/SIGTERM with Python
signal handlers of our own. rclpy's own handlers proved racy under a MultiThreadedExecutor: a SIGTERM
could leave the wait set blocked forever or raise RCLError instead of ExternalShutdownException.

Stopping follows one order for a single node and for a whole stack (:func:`stop_nodes`): the arm stops
first, then every running goal ends with a final status while the executor still spins (so clients and
the recorder see it), then the executor and the nodes go. :func:`exit_watchdog` bounds the whole exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions

from robopin.env import apply_ros_environment
from robopin.errors import is_named_error, one_line
from robopin.interfaces import READY
from robopin_ros.actions import older_server_found, served_elsewhere
from robopin_ros.parameters import refuse_undeclared_parameters

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
logger = logging.getLogger(__name__)

# How long running goals get to end with a final status once the arm was told to stop, and the recorder
# to write the end of its bag. Each wait returns as soon as nothing is running.
SHUTDOWN_DRAIN_S = 6.0
# The bound on a stopping process from the stop request to exit: past it the process ends itself even if
# a callback is stuck in a driver or SDK call (the executor's worker threads would keep it alive forever).
SHUTDOWN_EXIT_S = 10.0
# After the last goal ended: time for clients to fetch its result (they ask once they see the final status).
SHUTDOWN_RESULT_GRACE_S = 1.0
# Set by `robopin up` on a node it runs in a process of its own: that node stops (as on SIGTERM) once the
# process with this id has gone, so a `robopin up` killed outright leaves no node of its stack behind.
PARENT_PID_ENV = "ROBOPIN_PARENT_PID"


@contextmanager
def stop_signals(on_signal: Callable[[int], None], extra: Iterable[int] = ()) -> Iterator[None]:
    """Call ``on_signal(signum)`` on SIGINT or SIGTERM (and ``extra`` signals, e.g. SIGHUP) while the block runs;
    the previous handlers return after.

    The one place robopin processes (a node, ``robopin up``, ``robopin instruct``) take Ctrl-C and SIGTERM.
    """
    previous = {sig: signal.signal(sig, lambda signum, _frame: on_signal(signum))
                for sig in (*_STOP_SIGNALS, *extra)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop_nodes(nodes: Iterable[Node], timeout_s: float = SHUTDOWN_DRAIN_S) -> list[str]:
    """Bring a spinning graph of nodes to rest in the safe order; return what was still running at the end.

    Nodes take part through two optional methods: ``begin_shutdown()`` (return at once: stop the arm,
    make every wait of a running goal return, accept nothing new) and ``busy()`` (what still runs, as
    text; empty when idle). Arm drivers (nodes with an ``arm``) go first, so the arm is stopping before
    any goal learns of the shutdown. The executor must still spin: goals end and the recorder writes
    their final status through it.
    """
    nodes = list(nodes)
    was_busy = any(_busy(node) for node in nodes)
    arms = [node for node in nodes if getattr(node, "arm", None) is not None]
    for node in arms + [node for node in nodes if node not in arms]:
        begin = getattr(node, "begin_shutdown", None)
        if begin is None:
            continue
        try:
            begin()
        except Exception:  # one node failing to stop must not keep the others from stopping
            logger.exception("%s: begin_shutdown failed", node.get_name())
    deadline = time.monotonic() + timeout_s
    while True:
        running = [f"{node.get_name()}: {what}" for node in nodes for what in _busy(node)]
        if not running or time.monotonic() >= deadline:
            if running:
                logger.warning("still running after %.1f s of shutdown: %s", timeout_s, "; ".join(running))
            elif was_busy:
                time.sleep(SHUTDOWN_RESULT_GRACE_S)
            return running
        time.sleep(0.02)


def shutdown_executor(executor: Executor, spinner: threading.Thread | None = None, timeout_s: float = 5.0) -> bool:
    """Stop ``executor`` once no callback of it runs (waiting up to ``timeout_s``); True when nothing of it runs.

    False means a callback, the spin thread or a pool thread was still running at the deadline: the caller must
    not destroy the executor's nodes yet (see :func:`executor_threads_running`).

    Nodes are destroyed right after this, and two rclpy 7.1 (Jazzy) behaviours make a plain
    ``executor.shutdown()`` unsafe then: it waits for nothing (it sets ``_is_shutdown`` and then tests
    ``if not self._is_shutdown`` before waiting on its work tracker), so a running callback meets its
    destroyed publisher; and it destroys the executor's guard condition, which every callback handler
    triggers when it has taken its work, so a handler the thread pool starts a moment later fails.
    Both print "The following exception was never retrieved: cannot use Destroyable because
    destruction was requested". So: take the nodes out of the executor (nothing new is dispatched),
    wait until every handler already handed out has finished, and only then shut it down.
    """
    deadline = time.monotonic() + timeout_s
    for node in list(executor.get_nodes()):
        executor.remove_node(node)
    handed_out = getattr(executor, "_futures", None)  # MultiThreadedExecutor: handlers given to its pool
    while handed_out and any(not future.done() for future in list(handed_out)):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.005)
    tracker = getattr(executor, "_work_tracker", None)  # entered around every callback the executor runs
    idle = tracker.wait(max(0.0, deadline - time.monotonic())) if tracker is not None else True
    if spinner is not None and spinner.is_alive():
        # shutdown() destroys the guard condition at once, and a spin thread then building its wait set
        # fails on it ("'NoneType' object has no attribute 'handle'"): end the spin loop first (spin()
        # loops while not _is_shutdown; wake() makes its wait return), then clean up.
        with executor._shutdown_lock:
            executor._is_shutdown = True
        executor.wake()
        spinner.join(timeout=max(0.1, deadline - time.monotonic()))
    executor.shutdown(timeout_sec=0)
    if spinner is not None:
        spinner.join(timeout=max(0.1, deadline - time.monotonic()))
    pool = getattr(executor, "_executor", None)  # MultiThreadedExecutor's ThreadPoolExecutor, never shut down
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)
    return idle and not executor_threads_running(executor, spinner, max(0.0, deadline - time.monotonic()))


def executor_threads_running(executor: Executor, spinner: threading.Thread | None = None,
                             timeout_s: float = 0.0) -> list[str]:
    """The threads of a shut-down ``executor`` (its spin thread, its pool's workers) still alive after waiting up to
    ``timeout_s`` for them to end; empty once none runs.

    A node is destroyed only after this is empty: rclpy's ``destroy_node`` while another thread still spins the node
    or runs its callback can end the process with SIGSEGV (ros2/rclpy#663; launch_ros#213 and rclpy#674 defer
    ``destroy_node`` until the spin thread has finished for that reason).
    """
    deadline = time.monotonic() + timeout_s
    pool = getattr(executor, "_executor", None)
    threads = [thread for thread in (spinner, *getattr(pool, "_threads", ())) if thread is not None]
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return [thread.name for thread in threads if thread.is_alive() and thread is not threading.current_thread()]


def end_context(context: Context | None = None) -> None:
    """Shut ``context`` down (rclpy's default context when None) and free its middleware participant now.

    rclpy's shutdown leaves the participant (Fast DDS threads) to the context's handle, which destroyed nodes held
    in reference cycles keep until a garbage collection, at worst the interpreter's last, where a finished process
    was seen to die of SIGSEGV. So the cycles are collected here, then the handle destroyed: the participant ends.
    """
    from rclpy.utilities import get_default_context

    gc.collect()
    if context is None:
        context = get_default_context()
        rclpy.try_shutdown()  # also makes the next rclpy.init() start a new default context
    else:
        context.try_shutdown()
    context.destroy()


def destroy_when_stopped(executor: Executor, spinner: threading.Thread | None, nodes: Sequence[Node], *,
                         timeout_s: float = 5.0) -> bool:
    """Shut ``executor`` down, then destroy ``nodes`` once nothing of it runs; False (nodes kept) if that never came.

    A node kept alive is logged by name and left to the process's exit; its context may still be shut down (that
    interrupts the thread's waits rather than freeing what it uses).
    """
    if not shutdown_executor(executor, spinner, timeout_s):
        running = executor_threads_running(executor, spinner, timeout_s)
        if running:
            logger.error("not destroying %s: its executor still runs (%s) after %.0f s",
                         ", ".join(node.get_name() for node in nodes), ", ".join(running), 2 * timeout_s)
            return False
    for node in nodes:
        node.destroy_node()
    return True


def _busy(node: Node) -> list[str]:
    busy = getattr(node, "busy", None)
    if busy is None:
        return []
    try:
        return list(busy())
    except Exception:  # a node that cannot say is taken as idle (waiting on it could not end)
        logger.exception("%s: busy() failed", node.get_name())
        return []


def serve_readiness(node: Node) -> None:
    """``~/ready`` (std_srvs/Trigger) on a node of a process of its own: success once it is constructed and its
    own ``not_ready()`` (when it has one: the recorder's cameras heard) lists nothing; else what it waits for.

    ``robopin up`` asks it of the nodes it runs as child processes; anyone may (``ros2 service call``).
    """
    from std_srvs.srv import Trigger

    def answer(_request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        check = getattr(node, "not_ready", None)
        waiting = list(check()) if callable(check) else []
        response.success, response.message = not waiting, "; ".join(waiting) or "ready"
        return response

    node.create_service(Trigger, READY, answer)


def release_free_heap() -> float:
    """Return the free memory of every malloc arena to the OS (glibc's ``malloc_trim(0)``); the seconds it took.

    glibc gives each thread that allocates under contention an arena of its own (up to 8 per core) and returns an
    arena's freed pages to the OS only when they sit at its top: a node process whose executor threads handle
    frames and clouds keeps their freed memory resident. ``malloc_trim`` releases the free pages of all arenas
    (glibc >= 2.8, ``madvise(MADV_DONTNEED)``). Elsewhere (musl, macOS) nothing is done (0.0).
    """
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if not _malloc_trim:
        return 0.0
    started = time.perf_counter()
    _malloc_trim(0)
    return time.perf_counter() - started


_malloc_trim = None


def stop_with_parent(stop: threading.Event) -> None:
    """Set ``stop`` once the process named by :data:`PARENT_PID_ENV` has exited (nothing when it is unset).

    Waits on a pidfd of the parent (Linux 5.3+), which becomes readable when that process ends: the node
    hears of it at once, without polling, however the parent ended (SIGKILL included).
    """
    value = os.environ.get(PARENT_PID_ENV, "")
    if not value:
        return
    try:
        pidfd = os.pidfd_open(int(value))
    except ProcessLookupError:
        pidfd = None
    if pidfd is None or os.getppid() != int(value):  # gone before we looked (this process was handed on)
        if pidfd is not None:
            os.close(pidfd)
        stop.set()
        return

    def wait() -> None:
        try:
            select.select([pidfd], [], [])
        finally:
            os.close(pidfd)
        logger.warning("the process that started this node (pid %s) has exited: stopping", value)
        stop.set()

    threading.Thread(target=wait, name="parent-watch", daemon=True).start()


def exit_watchdog(timeout_s: float = SHUTDOWN_EXIT_S, code: int = 1) -> threading.Timer:
    """End this process ``timeout_s`` from now unless it has exited (prints every thread's stack first).

    Started when a stop is requested. rclpy's executor threads are not daemons: a callback that never
    returns (a driver call that hangs) would keep the process alive after everything else has stopped.
    """
    def expire() -> None:
        print(f"robopin: shutdown did not finish within {timeout_s:.0f} s; the stacks of the threads still "
              "running follow, then the process exits", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(all_threads=True)
        sys.stderr.flush()
        os._exit(code)

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    return timer


def make_executor(node: Node, threads: int = 4) -> Executor:
    """The executor ``node`` asks for: its class's ``EXECUTOR_THREADS`` (default ``threads``); 1 is single-threaded.

    A node whose callbacks are all short (state relays, recorders, cameras) spins best on one thread: rclpy's
    MultiThreadedExecutor hands a ready callback to its pool and, until a pool thread has taken the message,
    finds the same entity ready again and loops on it, in Python, holding the interpreter. A node with goals
    that block for seconds while waiting on other callbacks (a task, a plan, a trajectory) needs the pool.
    """
    wanted = int(getattr(node, "EXECUTOR_THREADS", threads))
    return SingleThreadedExecutor() if wanted <= 1 else MultiThreadedExecutor(num_threads=wanted)


def steady_timer(node: Node, period_s: float, callback: Callable[[], Any], **kwargs: Any) -> Any:
    """A timer of ``node`` on the steady clock.

    A simulated system's nodes take their time from /clock (``use_sim_time``), which stands still while the cell
    does (robopin_ros.bringup.SimClockPublisher); a timer on it would stop there too. What a timer paces here is
    the process's own work (publishing state, diagnostics, discovery, building clouds), which goes on meanwhile;
    what it stamps or ages is measured on the node's clock."""
    from rclpy.clock import Clock, ClockType

    return node.create_timer(period_s, callback, clock=Clock(clock_type=ClockType.STEADY_TIME), **kwargs)


class StreamSpinner:
    """A child node of ``parent`` for its high-rate subscriptions and timers, or for the clients its blocked goals
    wait on, on a single-threaded executor of its own.

    A node that needs a MultiThreadedExecutor for goals that block (a task, a plan, a trajectory) would
    otherwise hand every joint state, pose or frame to its pool and loop on the entity until a pool thread
    took it (see :func:`make_executor`), and a reply its goal waits for would go through that pool twice
    (the response, then the future's done callbacks as a task of their own). Callbacks created on
    :attr:`node` run here, one at a time, each on arrival; they may use the parent's publishers. The child
    is ``<parent>_<suffix>`` in the parent's namespace.
    """

    def __init__(self, parent: Node, suffix: str = "streams") -> None:
        # On the parent's clock: a simulated system's nodes take their time from /clock (use_sim_time).
        sim_time = Parameter("use_sim_time", value=bool(parent.get_parameter("use_sim_time").value))
        self.node = Node(f"{parent.get_name()}_{suffix}", namespace=parent.get_namespace(), context=parent.context,
                         parameter_overrides=[sim_time])
        self._executor = SingleThreadedExecutor(context=parent.context)
        self._executor.add_node(self.node)
        self._spinner: threading.Thread | None = None
        self._name = f"{parent.get_name()}-{suffix}"

    def start(self) -> StreamSpinner:
        """Start spinning (after the subscriptions and timers are created)."""
        if self._spinner is None:
            self._spinner = threading.Thread(target=self._spin, name=self._name, daemon=True)
            self._spinner.start()
        return self

    def _spin(self) -> None:
        with contextlib.suppress(ExternalShutdownException):
            self._executor.spin()

    def close(self) -> None:
        """Stop spinning once no callback runs, then destroy the child node."""
        if self._executor is None:
            return
        executor, spinner = self._executor, self._spinner
        self._executor = self._spinner = None
        destroy_when_stopped(executor, spinner, [self.node])


def run_node(node_factory: Callable[..., Node], args: Sequence[str] | None = None, *, threads: int = 4,
             sole_server: bool = True) -> int:
    """Create the node, spin it until Ctrl-C or SIGTERM, then shut down cleanly; return an exit code.

    ``sole_server``: refuse to start (exit 1, naming the other) while another living process serves an action
    this node serves, in its namespace and domain (:func:`robopin_ros.actions.served_elsewhere`).
    """
    apply_ros_environment()
    # `kill -USR1 <pid>` prints every thread's stack: the first tool for a node that hangs.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stop = threading.Event()
    stop_with_parent(stop)
    with stop_signals(lambda _signum: stop.set()):
        return _run(node_factory, args, threads, stop, sole_server)


def _run(node_factory: Callable[..., Node], args: Sequence[str] | None, threads: int, stop: threading.Event,
         sole_server: bool) -> int:
    rclpy.init(args=list(args) if args is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    executor: Executor | None = None
    node: Node | None = None
    failure: list[BaseException] = []
    older: dict[str, list[str]] = {}  # servers of an older process found after start-up

    def spin() -> None:
        try:
            executor.spin()
        except ExternalShutdownException:
            pass
        except BaseException as error:  # reported by the main thread below
            if not stop.is_set():
                failure.append(error)
        finally:
            stop.set()

    try:
        try:
            node = refuse_undeclared_parameters(node_factory())  # a parameter it does not declare: refused
        except Exception as error:
            if not is_named_error(error):
                raise  # a bug: keep the traceback
            # A configuration the node refuses (a planner backend missing here, a bad parameter value):
            # one line naming the error, as the command line does, and a failed exit.
            name = getattr(node_factory, "__name__", "node")
            print(f"{name} did not start: {one_line(error)}", file=sys.stderr, flush=True)
            return 1
        others = served_elsewhere(node) if sole_server else {}
        if others:
            # One stack per namespace and domain (robopin up probes before it starts; a node launched on its
            # own checks here): a second server of an action would take goals sent to the first.
            _refuse_second_server(node, "did not start", others)
            return 1
        serve_readiness(node)
        executor = make_executor(node, threads)
        executor.add_node(node)
        spinner = threading.Thread(target=spin, name="robopin-executor", daemon=True)
        spinner.start()
        if sole_server:
            # An older server discovered only after the start-up window: this process is the duplicate and goes.
            def watch() -> None:
                older.update(older_server_found(node, stop))
                if older:
                    stop.set()

            threading.Thread(target=watch, name="robopin-sole-server", daemon=True).start()
        while not stop.wait(0.2):
            pass
        if older:
            _refuse_second_server(node, "stops", older)
        exit_watchdog()
        stop_nodes([node])
        stopping, node = node, None  # destroyed below, or left to the process's exit (destroy_when_stopped)
        if not destroy_when_stopped(executor, spinner, [stopping]):
            return 1
    finally:
        if node is not None:
            node.destroy_node()
        end_context()
    if failure:
        raise failure[0]
    return 1 if older else 0


def _refuse_second_server(node: Node, verdict: str, others: dict[str, list[str]]) -> None:
    served = "; ".join(f"{action} is served by {', '.join(names)}" for action, names in others.items())
    print(f"{node.get_fully_qualified_name()} {verdict}: {served}. One stack serves a namespace: stop the other, "
          "or give this one its own namespace or ROS_DOMAIN_ID", file=sys.stderr, flush=True)
