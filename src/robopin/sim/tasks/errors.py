"""Errors of the simulated task scenarios."""


class ScenarioError(ValueError):
    """A scenario file or request that is invalid (missing key, bad value, unknown layout)."""


class LayoutError(RuntimeError):
    """A layout generator could not place everything without overlaps for this seed."""
