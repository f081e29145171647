"""The ``robopin`` subcommands that run or talk to the ROS stack: ``up``, ``trial``, ``instruct``, ``console``,
``bag play`` and ``bag record``.

They live with the ROS package because they start its nodes or act as its clients; the ``robopin`` entry point
(:mod:`robopin.cli`) registers them beside the core's own commands when this package is installed. Each module
defines ``register(subparsers)`` as the core's command modules do.
"""
