"""Camera capture for robopin: one abstract camera, backends (RealSense, ZED, sim, bag) and multi-view sync.

Backends are imported lazily through :func:`make_camera`, so importing this package needs no camera SDK.
"""

from robopin.cameras import base, snapshot
from robopin.cameras.base import *  # noqa: F403 -- the package exports what its modules export
from robopin.cameras.snapshot import *  # noqa: F403

__all__ = base.__all__ + snapshot.__all__
