"""JointTrajectory validation, sampling and timing, and min-jerk moves against their limits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.robots.errors import TrajectoryError
from robopin.robots.trajectory import JointTrajectory, min_jerk_move

NAMES = ("a", "b")


def test_rejects_malformed_trajectories():
    with pytest.raises(TrajectoryError, match="strictly increasing"):
        JointTrajectory(NAMES, [0.0, 0.0], [[0, 0], [1, 1]])
    with pytest.raises(TrajectoryError, match="shape"):
        JointTrajectory(NAMES, [0.0, 1.0], [[0, 0, 0], [1, 1, 1]])
    with pytest.raises(TrajectoryError, match="finite"):
        JointTrajectory(NAMES, [0.0, 1.0], [[0, np.nan], [1, 1]])
    with pytest.raises(TrajectoryError, match="unique"):
        JointTrajectory(("a", "a"), [0.0], [[0, 0]])
    with pytest.raises(TrajectoryError, match=">= 0"):
        JointTrajectory(NAMES, [-0.1, 1.0], [[0, 0], [1, 1]])


def test_linear_sampling_interpolates_and_holds_ends():
    trajectory = JointTrajectory(NAMES, [0.0, 2.0], [[0.0, 1.0], [2.0, -1.0]])
    q, v = trajectory.sample(0.5)
    np.testing.assert_allclose(q, [0.5, 0.5])
    np.testing.assert_allclose(v, [1.0, -1.0])
    q, v = trajectory.sample(5.0)
    np.testing.assert_allclose(q, [2.0, -1.0])
    np.testing.assert_allclose(v, [0.0, 0.0])


def test_hermite_sampling_passes_waypoints_with_their_velocities():
    trajectory = JointTrajectory(("a",), [0.0, 1.0, 2.0], [[0.0], [1.0], [0.0]], [[0.0], [0.5], [0.0]])
    for t, q_expected, v_expected in ((0.0, 0.0, 0.0), (1.0, 1.0, 0.5), (2.0, 0.0, 0.0)):
        q, v = trajectory.sample(t)
        assert q[0] == pytest.approx(q_expected)
        assert v[0] == pytest.approx(v_expected)


def test_scaled_stretches_time_and_reordered_permutes_columns():
    trajectory = JointTrajectory(NAMES, [0.0, 1.0], [[0.0, 10.0], [1.0, 20.0]], [[0, 0], [2.0, 4.0]])
    slow = trajectory.scaled(0.5)
    assert slow.duration_s == pytest.approx(2.0)
    np.testing.assert_allclose(slow.velocities[1], [1.0, 2.0])
    swapped = trajectory.reordered(("b", "a"))
    np.testing.assert_allclose(swapped.positions[1], [20.0, 1.0])
    with pytest.raises(TrajectoryError, match="do not match"):
        trajectory.reordered(("a", "c"))


def test_accelerations_follow_scaling_reordering_and_a_prepended_start():
    trajectory = JointTrajectory(NAMES, [1.0, 2.0], [[0.0, 10.0], [1.0, 20.0]], [[0, 0], [2.0, 4.0]],
                                 [[1.0, 3.0], [0.0, 0.0]])
    slow = trajectory.scaled(0.5)
    np.testing.assert_allclose(slow.accelerations[0], [0.25, 0.75])  # time stretched 2x: a / 4
    np.testing.assert_allclose(trajectory.reordered(("b", "a")).accelerations[0], [3.0, 1.0])
    started = trajectory.with_start(np.zeros(2))
    np.testing.assert_allclose(started.accelerations[0], [0.0, 0.0])
    np.testing.assert_allclose(started.velocities[0], [0.0, 0.0])
    with pytest.raises(TrajectoryError, match="accelerations must be finite"):
        JointTrajectory(NAMES, [0.0], [[0, 0]], None, [[np.inf, 0]])


def test_stationary_holds_one_configuration_at_rest():
    held = JointTrajectory.stationary(NAMES, np.array([0.3, -0.2]))
    assert held.duration_s == 0.0 and held.num_waypoints == 1
    q, v = held.sample(5.0)
    np.testing.assert_allclose(q, [0.3, -0.2])
    np.testing.assert_allclose(v, [0.0, 0.0])
    assert held.accelerations is not None and not held.accelerations.any()


def test_with_start_prepends_the_current_configuration():
    trajectory = JointTrajectory(NAMES, [1.0], [[1.0, 1.0]])
    started = trajectory.with_start(np.array([0.0, 0.5]))
    assert started.times_s.tolist() == [0.0, 1.0]
    np.testing.assert_allclose(started.positions[0], [0.0, 0.5])


def test_dense_times_keep_waypoints_and_bound_the_step():
    trajectory = JointTrajectory(NAMES, [0.0, 0.05, 1.0], [[0, 0], [0, 0], [1, 1]])
    times = trajectory.dense_times(0.1)
    assert set(trajectory.times_s.tolist()) <= set(np.round(times, 12).tolist())
    assert np.max(np.diff(times)) <= 0.1 + 1e-12


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),
    st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),
)
def test_min_jerk_move_respects_velocity_and_acceleration_limits(start, goal):
    vmax = np.array([1.0, 2.0, 0.5])
    amax = np.array([5.0, 3.0, 2.0])
    trajectory = min_jerk_move(("a", "b", "c"), np.array(start), np.array(goal), vmax, amax)
    np.testing.assert_allclose(trajectory.positions[0], start)
    np.testing.assert_allclose(trajectory.positions[-1], goal, atol=1e-12)
    times = np.linspace(0.0, trajectory.duration_s, 2001)
    _, velocity = trajectory.sample(times)
    assert np.all(np.abs(velocity) <= vmax * (1 + 1e-6) + 1e-9)
    acceleration = np.diff(velocity, axis=0) / np.diff(times)[:, None]
    # Hermite resampling of the quintic is exact to a few per cent in acceleration.
    assert np.all(np.abs(acceleration) <= amax * 1.05 + 1e-6)
