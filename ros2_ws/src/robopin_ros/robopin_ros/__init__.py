"""robopin ROS 2 nodes: thin rclpy wrappers around the core library ``robopin``.

Shared pieces: ``conversions`` (every message ⇄ core-type conversion, one module) and ``runtime``
(the one ``main()`` body every node uses: init, spin on an executor, clean shutdown on Ctrl-C/SIGTERM).
"""
