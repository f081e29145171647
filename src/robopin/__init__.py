"""robopin: language instructions to robot-arm motion through Pinned Chain-of-Thought.

The core library. Nothing under ``robopin`` imports rclpy; ROS nodes live in ``robopin_ros``.
"""

__version__ = "0.1.0"
