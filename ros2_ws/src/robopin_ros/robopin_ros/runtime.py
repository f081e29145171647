"""How every robopin node process starts and stops: one place for init, spin and clean shutdown.

Use from a node module::

    def main(args=None):
        return run_node(CameraNode, args)

The executor spins in a worker thread while the main thread waits for SIGINT/SIGTERM with Python
signal handlers of our own. rclpy's own handlers proved racy under a MultiThreadedExecutor: a SIGTERM
could leave the wait set blocked forever or raise RCLError instead of ExternalShutdownException.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading
from collections.abc import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from robopin.env import apply_ros_environment
from robopin.errors import is_named_error, one_line

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run_node(node_factory: Callable[..., Node], args: Sequence[str] | None = None, *, threads: int = 4) -> int:
    """Create the node, spin it until Ctrl-C or SIGTERM, then shut down cleanly; return an exit code."""
    apply_ros_environment()
    # `kill -USR1 <pid>` prints every thread's stack: the first tool for a node that hangs.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
    rclpy.init(args=list(args) if args is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    executor = MultiThreadedExecutor(num_threads=threads)
    node: Node | None = None
    failure: list[BaseException] = []

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
            node = node_factory()
        except Exception as error:
            if not is_named_error(error):
                raise  # a bug: keep the traceback
            # A configuration the node refuses (a planner backend missing here, a bad parameter value):
            # one line naming the error, as the command line does, and a failed exit.
            name = getattr(node_factory, "__name__", "node")
            print(f"{name} did not start: {one_line(error)}", file=sys.stderr, flush=True)
            return 1
        executor.add_node(node)
        spinner = threading.Thread(target=spin, name="robopin-executor", daemon=True)
        spinner.start()
        while not stop.wait(0.2):
            pass
        executor.shutdown(timeout_sec=5.0)
        spinner.join(timeout=5.0)
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failure:
        raise failure[0]
    return 0
