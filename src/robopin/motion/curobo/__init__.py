"""cuRobo (NVIDIA, CUDA) backend: config, conversions, robot sphere models, and the planner.

Only :mod:`robopin.motion.curobo.planner` imports cuRobo and torch; everything else here is plain
numpy so configs, conversions and sphere models are checked on machines without a GPU.
"""
