"""CPU backend: OMPL's official Python bindings (2.x, nanobind) with pinocchio/coal state validity.

OMPL searches joint space (RRT-Connect by default) and shortcuts the path; every state and every
motion segment is judged by :meth:`MotionPlanner.is_valid`, the same model the dense verifier uses.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import NDArray

from robopin.motion.errors import BackendUnavailableError
from robopin.motion.planner import MotionPlanner, OmplPlannerConfig
from robopin.motion.robot import RobotModel
from robopin.motion.types import PlanStatus


def _import_ompl():
    try:
        from ompl import base, geometric, util
    except ImportError as exc:  # pragma: no cover - only without the wheel
        raise BackendUnavailableError(f"the 'ompl' planner needs ompl==2.0.1 (official bindings): {exc}") from exc
    return base, geometric, util


class OmplPlanner(MotionPlanner):
    """RRT-Connect (or another OMPL geometric planner) + OMPL path simplification."""

    config_class = OmplPlannerConfig
    config: OmplPlannerConfig

    def __init__(self, config: OmplPlannerConfig, robot: RobotModel | None = None) -> None:
        super().__init__(config, robot)
        ob, og, ou = _import_ompl()
        ou.setLogLevel(ou.LogLevel.LOG_WARN)
        self._ob, self._og = ob, og
        dof = self.robot.dof
        self._space = ob.RealVectorStateSpace(dof)
        bounds = ob.RealVectorBounds(dof)
        for i in range(dof):
            bounds.setLow(i, float(max(self.robot.lower[i], -2 * np.pi)))
            bounds.setHigh(i, float(min(self.robot.upper[i], 2 * np.pi)))
        self._space.setBounds(bounds)
        self._setup = og.SimpleSetup(self._space)
        self._setup.setStateValidityChecker(self._state_valid)
        info = self._setup.getSpaceInformation()
        info.setStateValidityCheckingResolution(config.check_resolution_rad / self._space.getMaximumExtent())
        self._planner = getattr(og, config.algorithm)(info)
        if config.range_rad > 0.0 and hasattr(self._planner, "setRange"):
            self._planner.setRange(config.range_rad)
        self._setup.setPlanner(self._planner)
        # OMPL draws from its own global RNG; seeding makes benchmark runs repeatable. OMPL ignores a seed
        # of 0 ("Random generator seed cannot be 0", util/src/RandomNumbers.cpp), our default: shift by one.
        if hasattr(ou, "RNG") and hasattr(ou.RNG, "setSeed"):
            ou.RNG.setSeed(config.seed + 1)
        self._scratch = np.zeros(dof)
        self.validity_checks = 0

    def _state_valid(self, state) -> bool:
        q = self._scratch
        for i in range(len(q)):
            q[i] = state[i]
        self.validity_checks += 1
        return self.is_valid(q)

    def _state(self, q: NDArray[np.float64]):
        state = self._space.allocState()
        for i, value in enumerate(q):
            state[i] = float(value)
        return state

    def _solve_path(self, start, goal, timeout_s):
        setup = self._setup
        setup.clear()
        setup.setStartAndGoalStates(self._state(start), self._state(goal))
        began = time.perf_counter()
        setup.solve(float(timeout_s))
        if not setup.haveExactSolutionPath():
            elapsed = time.perf_counter() - began
            if elapsed >= 0.95 * timeout_s:
                return None, PlanStatus.TIMEOUT, f"no path within {timeout_s:.3f} s"
            return None, PlanStatus.NO_PATH, "OMPL found no exact solution"
        if self.config.simplify:
            remaining = timeout_s - (time.perf_counter() - began)
            if remaining > 1e-3:
                setup.simplifySolution(float(min(remaining, 0.25)))
        path = setup.getSolutionPath()
        dof = self.robot.dof
        waypoints = np.array([[path.getState(k)[i] for i in range(dof)] for k in range(path.getStateCount())])
        waypoints[0], waypoints[-1] = start, goal
        return waypoints, PlanStatus.SUCCESS, ""
