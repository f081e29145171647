"""robopin.clocks: the simulator's time as a function of wall time, from the samples a simulated arm publishes."""

from __future__ import annotations

import pytest

from robopin.clocks import SimulatedClock, wall_elapsed


def test_a_still_simulator_ages_nothing_and_a_moving_one_ages_by_its_own_time():
    clock = SimulatedClock()
    assert clock.elapsed(10.0, 12.5) == 2.5  # nothing heard yet: wall time
    for wall, sim in [(10.0, 1.0), (11.0, 1.0), (12.0, 1.0), (13.0, 1.5), (15.0, 2.5), (16.0, 2.5)]:
        clock.add(wall, sim)
    assert clock.elapsed(10.0, 12.0) == 0.0  # still: a loaded machine's wait is no age
    assert clock.elapsed(12.0, 15.0) == pytest.approx(1.5)  # moving at half the wall rate (a starved stepper)
    assert clock.at(14.0) == pytest.approx(2.0)  # interpolated between samples
    assert clock.at(5.0) == 1.0 and clock.at(99.0) == 2.5  # before the first and after the last sample
    assert clock.samples == 5  # the still run 10..12 keeps its ends


def test_out_of_order_samples_are_dropped_and_old_ones_go_past_the_horizon():
    clock = SimulatedClock(horizon_s=10.0)
    clock.add(1.0, 0.0)
    clock.add(2.0, 1.0)
    clock.add(1.5, 5.0)  # older than the newest: dropped
    clock.add(3.0, 0.5)  # the simulator's time never goes back: dropped
    assert clock.at(2.0) == 1.0 and clock.samples == 2
    for wall in range(3, 30):
        clock.add(float(wall), float(wall))
    assert clock.samples <= 12  # the last sample before the horizon still bounds older stamps
    assert clock.at(0.0) == clock.at(18.0) == 18.0
    with pytest.raises(ValueError, match="horizon_s"):
        SimulatedClock(horizon_s=0.0)
    assert wall_elapsed(3.0, 4.5) == 1.5
