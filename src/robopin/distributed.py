"""Ray for the work that outgrows one process (trial batches, bag replays): a local Ray bound to loopback, or a
cluster by address.

Loopback: a local Ray binds its servers to the node's address, which Ray takes from the route to the outside; with
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (``ray._private.services.get_node_ip_address``) it takes the loopback address
instead, as it does on macOS and Windows, so nothing listens beyond this machine. A cluster started with ``ray
start`` authenticates by token (``~/.ray/auth_token`` or ``RAY_AUTH_TOKEN`` here, as on its nodes); every node
needs robopin installed at the same path.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

__all__ = ["LOCAL_RAY_ENV", "start_ray"]

LOCAL_RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # servers on 127.0.0.1 (see the module docstring)
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage report sent out of the machine
}


def start_ray(address: str | None, cpus: int) -> Any:
    """``ray``, initialised: joined to the cluster at ``address``, else a local Ray of our own with ``cpus`` CPUs."""
    for name, value in LOCAL_RAY_ENV.items():
        os.environ.setdefault(name, value)
    import ray

    # ray.init() takes SIGTERM over: first a Python handler that exits (ray/_private/worker.py, "terminate any
    # signal before connecting driver"), then the core worker's own, which logs "SIGTERM received" and aborts
    # (SIGABRT, no finally runs). The caller's handlers come back once Ray is up, so its stop handling holds.
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    if address:
        # `ray start` clusters authenticate by token (Ray 2.60's default); a client sends it only in token mode.
        token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or (
            Path.home() / ".ray" / "auth_token").is_file()
        if token and "RAY_AUTH_MODE" not in os.environ:
            os.environ["RAY_AUTH_MODE"] = "token"
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        # "local": a Ray of our own, never a cluster this machine happens to run (ray.init() would join that).
        ray.init(address="local", num_cpus=max(cpus, 1), include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    if threading.current_thread() is threading.main_thread():
        for number, handler in handlers.items():
            if handler is not None:
                signal.signal(number, handler)
    return ray
