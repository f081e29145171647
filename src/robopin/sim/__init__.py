"""The simulated workcell (pybullet): RoboPIN's tabletop with a static and a wrist RGB-D camera.

- :mod:`robopin.sim.world` — :class:`SimWorld` (table, Panda or xArm6, objects, cameras, physics
  thread), registered by name so the sim camera/arm backends of one process share it.
- :mod:`robopin.sim.render` — RGB-D + segmentation rendering, intrinsics, optical poses, depth noise.
- :mod:`robopin.sim.tasks` — scenario specs (YAMLs in ``scenarios/``), seeded layouts, scene building, success checks.
- :mod:`robopin.sim.scripted` / :mod:`robopin.sim.selfcheck` — ground-truth pick-and-place that
  proves every scene solvable.
- :mod:`robopin.sim.oracle` / :mod:`robopin.sim.oracle_backend` — ground-truth perception writing
  PinCoT (with error injection), also usable as the ``oracle`` VLM backend. Not a model.
- :mod:`robopin.sim.camera` / :mod:`robopin.sim.arm` — the ``sim`` camera and arm backends.

Submodules import pybullet; importing this package does not.
"""
