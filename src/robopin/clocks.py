"""How much time passed between two wall-clock stamps, on the clock that ages the data they stamp.

A real cell changes while the wall clock runs, so a cloud or a joint state ages by wall time. A simulated cell with
``real_time_factor: 0`` changes only while the physics steps (in lockstep with the arm's controller): a starved
machine makes it slower in wall time, not older. :class:`SimulatedClock` maps wall time to the simulator's time from
samples the simulator publishes (``robopin.interfaces.SIM_CLOCK``), so an age measured on it is the same on an idle
machine and a loaded one. Stamps and timers stay on the wall clock; only ages move. No rclpy here.
"""

from __future__ import annotations

import bisect
import threading

__all__ = ["SimulatedClock", "wall_elapsed"]


def wall_elapsed(from_s: float, to_s: float) -> float:
    """Seconds of wall time between two wall stamps (a real cell's clock)."""
    return to_s - from_s


class SimulatedClock:
    """The simulator's time as a function of wall time, from (wall, simulated) samples.

    Between two samples the simulator's time is interpolated; before the first kept sample it is the first's, after
    the last the last's (a simulator whose time stands still publishes samples that say so, and one that moves
    publishes them as it moves). A run of samples whose simulated time stands still keeps only its ends, so a still
    cell costs two samples however long it waits. Samples older than ``horizon_s`` (of wall time) before the newest
    go, but for the last of them, which still bounds the oldest stamps. Thread-safe.
    """

    def __init__(self, horizon_s: float = 600.0) -> None:
        if not horizon_s > 0.0:
            raise ValueError(f"horizon_s must be > 0, got {horizon_s}")
        self.horizon_s = float(horizon_s)
        self._lock = threading.Lock()
        self._wall: list[float] = []
        self._sim: list[float] = []

    def add(self, wall_s: float, sim_s: float) -> None:
        """A sample: the simulator's time was ``sim_s`` at wall time ``wall_s``. Out-of-order samples are dropped."""
        with self._lock:
            if self._wall and (wall_s <= self._wall[-1] or sim_s < self._sim[-1]):
                return
            if len(self._sim) >= 2 and self._sim[-1] == self._sim[-2] == sim_s:
                self._wall[-1] = wall_s  # the still run grows: keep its ends only
            else:
                self._wall.append(float(wall_s))
                self._sim.append(float(sim_s))
            keep_from = bisect.bisect_left(self._wall, wall_s - self.horizon_s) - 1
            if keep_from > 0:
                del self._wall[:keep_from], self._sim[:keep_from]

    @property
    def samples(self) -> int:
        with self._lock:
            return len(self._wall)

    def at(self, wall_s: float) -> float | None:
        """The simulator's time at wall time ``wall_s`` (None before any sample)."""
        with self._lock:
            if not self._wall:
                return None
            i = bisect.bisect_right(self._wall, wall_s)
            if i == 0:
                return self._sim[0]
            if i == len(self._wall):
                return self._sim[-1]
            w0, w1, s0, s1 = self._wall[i - 1], self._wall[i], self._sim[i - 1], self._sim[i]
            return s0 + (s1 - s0) * (wall_s - w0) / (w1 - w0)

    def elapsed(self, from_s: float, to_s: float) -> float:
        """Seconds of simulated time between two wall stamps; wall seconds before any sample came (the simulator
        has not been heard yet: nothing says its time stood still)."""
        start, end = self.at(from_s), self.at(to_s)
        if start is None or end is None:
            return to_s - from_s
        return end - start
