"""Stand-ins for counterparts that cannot run on a development or CI machine, for tests and benchmarks.

- :mod:`~tests.doubles.xarm_emulator`: a UFACTORY controller on its TCP ports, for the real xArm SDK.
- :mod:`~tests.doubles.franka_sim_process`: a Franka robot behind the real libfranka/franky calls.
- :mod:`~tests.doubles.tiny_model`: a random-weight Qwen-VL checkpoint written offline.

They live beside the tests and do not ship in the robopin packages; nothing a deployment runs imports
them (``tests/test_import_graph.py``), so a robot or a model from here is never mistaken for the real one.
The simulated workcell, which a user runs on purpose, is :mod:`robopin.sim`.
"""
