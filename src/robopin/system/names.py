"""ROS graph names under a robot's namespace: validate a namespace, expand a relative name, strip one.

Every topic, service and action a robopin node creates is relative (``robopin/instruct``,
``cameras/static/color/image_raw``, ``joint_states``, ``tf``), so it resolves under the node's namespace:
``/robopin/instruct`` in the root namespace (the default, today's graph), ``/left/robopin/instruct`` under
``namespace: left``. The only global names in a robopin graph are the ones rcl itself creates for every
node, ``/rosout`` and ``/parameter_events`` (rcl's logging and parameter-event publishers are absolute by
design), ``/diagnostics`` (one topic per graph, as diagnostic_updater publishes it; each status names its
robot's namespace), and whatever absolute name a system file gives a parameter (an external controller's action).

Bags hold names as the root namespace would have them (:func:`strip_namespace`, applied once by
:class:`robopin.bags.TrialRecorder`), so a bag recorded under ``left`` replays, re-plans and reports like any
other, and ``replay_node`` republishes it under whatever namespace it runs in.
"""

from __future__ import annotations

import re

from robopin.interfaces import DIAGNOSTICS_TOPIC

__all__ = ["DIAGNOSTICS_TOPIC", "GLOBAL_NAMES", "NamespaceError", "absolute_name", "namespaced_label",
           "normalize_namespace", "strip_namespace"]

# rcl_logging's /rosout publisher and rclpy's /parameter_events publisher, created by every node
# (rcl/src/rcl/node.c, rclpy/node.py); they stay global under any namespace, as /diagnostics does.
GLOBAL_NAMES = ("/rosout", "/parameter_events", DIAGNOSTICS_TOPIC)
# rcl validate_namespace: tokens of alphanumerics and '_', not starting with a digit, separated by single '/'.
_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class NamespaceError(ValueError):
    """A namespace ROS would refuse; the message names it and the rule."""


def normalize_namespace(namespace: str) -> str:
    """``''``, ``'/'`` -> ``''`` (root); ``'left'``, ``'/left/'`` -> ``'/left'``; anything else invalid is refused."""
    if not isinstance(namespace, str):
        raise NamespaceError(f"namespace must be a string, got {namespace!r}")
    text = namespace.strip().strip("/")
    if not text:
        return ""
    tokens = text.split("/")
    if not all(_TOKEN.match(token) for token in tokens):
        raise NamespaceError(f"namespace {namespace!r} is not a ROS namespace: tokens of letters, digits and '_', "
                             "not starting with a digit, separated by single '/' (e.g. left or lab/left)")
    return "/" + "/".join(tokens)


def absolute_name(name: str, namespace: str = "") -> str:
    """``name`` as the graph has it for a node in ``namespace`` (a leading '/' is kept as it is).

    Works for the recorder's glob patterns too (``cameras/*/color/image_raw`` -> ``/left/cameras/*/...``).
    """
    if name.startswith("/"):
        return name
    return f"{normalize_namespace(namespace)}/{name}"


def strip_namespace(name: str, namespace: str = "") -> str:
    """An absolute ``name`` in ``namespace`` as the root namespace would have it; names outside it stay."""
    prefix = normalize_namespace(namespace)
    if prefix and name.startswith(prefix + "/"):
        return name[len(prefix):]
    return name


def namespaced_label(label: str, namespace: str = "") -> str:
    """A label on a global topic (a /diagnostics status) that says whose it is: ``left/camera_node: static``."""
    prefix = normalize_namespace(namespace)
    return f"{prefix[1:]}/{label}" if prefix else label
