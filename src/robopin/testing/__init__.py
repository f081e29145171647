"""Stand-ins for counterparts that cannot run on a development or CI machine, for tests and benchmarks.

- :mod:`~robopin.testing.xarm_emulator`: a UFACTORY controller on its TCP ports, for the real xArm SDK.
- :mod:`~robopin.testing.franka_sim_process`: a Franka robot behind the real libfranka/franky calls.
- :mod:`~robopin.testing.tiny_model`: a random-weight Qwen-VL checkpoint written offline.

Nothing a deployment runs imports this package (``tests/test_import_graph.py``): a robot or a model
from here is never mistaken for the real one. The simulated workcell, which a user runs on purpose, is
:mod:`robopin.sim`.
"""
