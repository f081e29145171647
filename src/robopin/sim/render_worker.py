"""A simulated world's renders in a worker process: a render holds neither the world's lock nor this process.

pybullet's ``getCameraImage`` keeps the GIL for its whole TinyRenderer pass (0.1-0.7 s at 640x480 on this
machine kind, measured: a 1 ms ticker thread did not run once during a render). Where every node shares one
interpreter (``robopin up``), each camera frame therefore stalls every callback, the motion planner's search
included. :class:`RenderWorker` runs the renders in a child Python process that owns a second pybullet DIRECT
client: it is built by replaying the world's body-creation calls in the same order (same body ids, so the
segmentation matches), and before each render it takes the world's base poses and joint positions (what the
world's lock guarded at that instant). The child draws only TinyRenderer's raw buffers; metric depth,
segmentation masking and depth noise stay with the world (:func:`robopin.sim.render.view_from_buffers`).

The child is ``python -m robopin.sim.render_worker FD`` on one end of a socket pair (not multiprocessing: a
spawned child would re-import the parent's main module, a forked one would inherit DDS threads). Messages are
pickled tuples: ``("build", recipe)`` (again for bodies added later) → ``("ok", bodies)``; ``("reset",)`` (the
world was reset: every body goes) → ``("ok", 0)``;
``("render", states, spec, T_base_cam)`` → ``("ok", rgba, depth_buffer, segmentation)``; any failure →
``("error", message)``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
from numpy.typing import NDArray

logger = logging.getLogger(__name__)

Recipe = list[tuple[str, tuple, dict, Any]]
"""Body-creation calls in order: (pybullet function name, args, kwargs, the value it returned)."""

BodyState = tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
"""One body's base position, base orientation (quaternion xyzw) and movable joint positions."""


class RenderWorkerError(RuntimeError):
    """The render worker is gone, answered with an error, or did not answer in time."""


class RenderWorker:
    """A child process that renders with a mirror of a world's bodies; thread-safe (one request at a time)."""

    def __init__(self, recipe: Recipe, *, timeout_s: float = 60.0) -> None:
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        parent, child = socket.socketpair()
        try:
            # pybullet prints its build time on stdout at import: the child's stdout goes nowhere.
            self._process = subprocess.Popen(
                [sys.executable, "-m", "robopin.sim.render_worker", str(child.fileno())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        finally:
            child.close()
        self._connection = Connection(parent.detach())
        try:
            self.bodies = int(self._request(("build", recipe))[0])
        except BaseException:
            self.close()
            raise

    def extend(self, recipe: Recipe) -> None:
        """Replay more creation calls (bodies the world added since)."""
        self.bodies = int(self._request(("build", recipe))[0])

    def reset(self) -> None:
        """Remove every body (the world was reset); the next :meth:`extend` builds the mirror again."""
        self.bodies = int(self._request(("reset",))[0])

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process.poll() is None and not self._connection.closed

    def render(self, states: Sequence[BodyState], spec: Any, T_base_cam: NDArray[np.float64]) -> tuple[
            NDArray[np.uint8], NDArray[np.float32], NDArray[np.int32]]:
        """TinyRenderer's (rgba, depth buffer, segmentation) of ``spec`` at ``T_base_cam`` with bodies at ``states``."""
        rgba, depth, segmentation = self._request(("render", list(states), spec, np.asarray(T_base_cam)))
        return rgba, depth, segmentation

    def _request(self, message: tuple) -> tuple:
        with self._lock:
            if not self.alive:
                raise RenderWorkerError(f"render worker (pid {self._process.pid}) is not running")
            try:
                self._connection.send(message)
                if not self._connection.poll(self.timeout_s):
                    raise RenderWorkerError(f"render worker did not answer within {self.timeout_s:.0f} s")
                reply = self._connection.recv()
            except (OSError, EOFError) as error:
                raise RenderWorkerError(f"render worker connection lost: {error!r}") from None
        if reply[0] != "ok":
            raise RenderWorkerError(f"render worker: {reply[1]}")
        return reply[1:]

    def close(self) -> None:
        """Ask the child to exit, then end it if it does not (idempotent)."""
        with self._lock:
            if not self._connection.closed:
                with contextlib.suppress(OSError):
                    self._connection.send(("close",))
                self._connection.close()
        try:
            self._process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=5.0)


# ----------------------------------------------------------------------------------------------- the child


class _Mirror:
    """The child's pybullet client: the replayed bodies and the last state applied to each."""

    def __init__(self) -> None:
        import pybullet as p
        import pybullet_data

        self.p = p
        self.client = p.connect(p.DIRECT)
        p.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=self.client)
        self.bodies = 0
        self.movable: list[list[int]] = []
        self.applied: list[BodyState | None] = []

    def replay(self, recipe: Recipe) -> None:
        p, client = self.p, self.client
        for name, args, kwargs, returned in recipe:
            value = getattr(p, name)(*args, physicsClientId=client, **kwargs)
            if isinstance(returned, int) and value != returned:
                raise RuntimeError(f"{name} returned {value} in the mirror, {returned} in the world")
        for body in range(self.bodies, p.getNumBodies(physicsClientId=client)):
            self.movable.append([j for j in range(p.getNumJoints(body, physicsClientId=client))
                                 if p.getJointInfo(body, j, physicsClientId=client)[2] != p.JOINT_FIXED])
            self.applied.append(None)
        self.bodies = p.getNumBodies(physicsClientId=client)

    def reset(self) -> None:
        self.p.resetSimulation(physicsClientId=self.client)
        self.bodies, self.movable, self.applied = 0, [], []

    def apply(self, states: Sequence[BodyState]) -> None:
        p, client = self.p, self.client
        if len(states) != self.bodies:
            raise RuntimeError(f"the world has {len(states)} bodies, the mirror {self.bodies}")
        for body, state in enumerate(states):
            if state == self.applied[body]:
                continue  # untouched bodies keep exactly the pose they were built with
            position, orientation, joints = state
            p.resetBasePositionAndOrientation(body, position, orientation, physicsClientId=client)
            for joint, value in zip(self.movable[body], joints, strict=True):
                p.resetJointState(body, joint, value, physicsClientId=client)
            self.applied[body] = state


def _serve(connection: Connection) -> None:
    from robopin.sim.render import camera_buffers

    mirror: _Mirror | None = None
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return  # the parent went away
        try:
            if message[0] == "close":
                return
            if message[0] == "build":  # the first builds the mirror, later ones add bodies to it
                mirror = mirror or _Mirror()
                mirror.replay(message[1])
                reply: tuple = ("ok", mirror.bodies)
            elif message[0] == "reset":
                if mirror is not None:
                    mirror.reset()
                reply = ("ok", 0)
            elif message[0] == "render":
                if mirror is None:
                    raise RuntimeError("render before build")
                _, states, spec, T_base_cam = message
                mirror.apply(states)
                reply = ("ok", *camera_buffers(mirror.client, spec, T_base_cam))
            else:
                raise RuntimeError(f"unknown request {message[0]!r}")
        except Exception as error:  # reported to the parent, which falls back to rendering itself
            reply = ("error", f"{type(error).__name__}: {error}")
        connection.send(reply)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    connection = Connection(int(argv[0]))
    try:
        _serve(connection)
    finally:
        connection.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
