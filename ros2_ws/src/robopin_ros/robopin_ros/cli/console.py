"""``robopin console``: the operator console in a browser, for a stack running in this ROS domain.

Serves one local page (127.0.0.1 only) with the live camera views and the planner's annotated views
(pins and IDs drawn), the stage of the running task, an instruction box (the same ``Instruct`` call as
``robopin instruct``) and a Stop button that cancels every task and stops the arm. During a batch,
``robopin trial --judge operator`` serves the same console itself, with the scene set-up, the
judgement buttons and the batch's table. Stop it with Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

__all__ = ["register"]


def _console(args: argparse.Namespace) -> int:
    from robopin.env import apply_ros_environment
    from robopin.interfaces import ARM
    from robopin.system import SystemFileError, load_system
    from robopin.trials.console import ConsoleError, ConsoleServer

    views, prefix, topics = list(args.views or []), args.arm_prefix, None
    if args.system:
        try:
            system = load_system(args.system)
        except SystemFileError as error:
            print(f"robopin console: {error}", file=sys.stderr)
            return 2
        views, topics = views or list(system.views), system.view_topics()
        for node in system.nodes_running("arm_driver_node"):
            prefix = prefix or str(node.parameters.get("prefix", ""))
        namespace = args.namespace if args.namespace is not None else system.namespace
    else:
        namespace = args.namespace or ""  # ros_namespace has normalized and checked it
    views, prefix = views or ["static", "wrist"], prefix or ARM.prefix
    apply_ros_environment()
    from robopin_ros.operator_console import open_console_link

    link = open_console_link(views, arm_prefix=prefix, namespace=namespace, topics=topics)
    try:
        try:
            server = ConsoleServer(link.link, None, host=args.host, port=args.port).start()
        except ConsoleError as error:
            print(f"robopin console: {error}", file=sys.stderr)
            return 2
        print(f"robopin console: {server.url} (views {views}, stop service {link.link.stop_client.srv_name}, "
              f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}); Ctrl-C ends it", flush=True)
        if not args.no_browser:
            server.open_in_browser()
        from robopin_ros.runtime import stop_signals

        stop = threading.Event()
        with stop_signals(lambda _signum: stop.set()):
            while not stop.wait(0.5):
                pass
        server.close()
        return 0
    finally:
        link.close()


def register(subparsers) -> None:
    """Add ``robopin console``."""
    from robopin.cli.arguments import ros_namespace

    parser = subparsers.add_parser("console", help="the operator console (browser) for a running stack",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", default=None, help="system file or name: its views and arm driver prefix")
    parser.add_argument("--views", nargs="+", default=None, help="camera views (default: the system's, or "
                                                                 "static wrist)")
    parser.add_argument("--arm-prefix", default="", help="the arm driver's prefix (default robopin/arm)")
    parser.add_argument("--namespace", type=ros_namespace, default=None,
                        help="the robot's ROS namespace (default: the system file's, else the root namespace)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to serve on")
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free port)")
    parser.add_argument("--no-browser", action="store_true",
                        help="do not open the page in this machine's browser (opened when a desktop is there)")
    parser.set_defaults(func=_console)
