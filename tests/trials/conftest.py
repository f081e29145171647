"""Fixtures of this folder: the recorded sim trial shared with the other trial-reading tests."""

from tests.sim_trial_fixture import sim_trial  # noqa: F401  (a pytest fixture, used by name)
