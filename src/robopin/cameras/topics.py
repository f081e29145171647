"""Where a camera view's topics are and how they are published: our camera_node, realsense-ros or zed-ros2-wrapper.

Every node that reads or writes camera topics (camera_node, the planner's snapshot, projection_node,
recorder_node, calibration_node) asks :func:`view_topics` for a view's names and QoS, so a system file
can point the stack at a driver's own topics (``cameras: {static: {driver: realsense}}``) instead of
remapping. Each driver preset names the layout the driver publishes when launched with its camera name
set to the view's name; ``prefix`` replaces that default for any other launch.

Depth arrives in either of the two encodings these drivers publish, both decoded by
:func:`robopin.cameras.images.decode_depth_m`: 16UC1 millimetres (realsense-ros: Z16 published as
``TYPE_16UC1``, base_realsense_node.cpp; zed-ros2-wrapper with ``depth.openni_depth_mode: true``) and
32FC1 metres (zed-ros2-wrapper's default, ``openni_depth_mode: false`` in config/common_stereo.yaml).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["CAMERA_DRIVERS", "CAMERA_QOS", "CAMERA_ROOT", "CameraDriverLayout", "CameraTopicsError",
           "ViewTopics", "camera_topic_patterns", "camera_topic_settings", "prefix_topics", "view_topics"]

CAMERA_ROOT = "cameras"
"""Root of our camera_node's layout, ``<root>/<view>/...`` (relative: under the robot's namespace)."""

CAMERA_QOS = ("reliable", "sensor_data")
"""``reliable``: RELIABLE, keep last 5 (our camera_node; realsense-ros's default image QoS SYSTEM_DEFAULT and
zed-ros2-wrapper's ``rclcpp::QoS(10)`` are reliable under Fast DDS). ``sensor_data``: rmw's
``qos_profile_sensor_data``, BEST_EFFORT keep last 5 (realsense-ros ``<stream>_qos:=SENSOR_DATA``). A
RELIABLE subscriber never matches a BEST_EFFORT publisher, so this must say what the driver publishes."""

_PREFIX = re.compile(r"^/?[A-Za-z_~{][A-Za-z0-9_/{}]*$")


class CameraTopicsError(ValueError):
    """A view's topic settings that cannot be used (unknown driver or QoS, a bad prefix): names the value."""


@dataclasses.dataclass(frozen=True)
class CameraDriverLayout:
    """One driver's topic layout under a view's prefix (relative names) and the QoS it publishes with.

    ``default_prefix`` may hold ``{view}``. ``raw_depth`` / ``raw_depth_info`` are depth in the depth
    imager's own frame (realsense-ros without ``align_depth.enable``); empty where the driver has none.
    """

    default_prefix: str
    color: str
    info: str
    depth: str
    raw_depth: str
    raw_depth_info: str
    qos: str


CAMERA_DRIVERS: dict[str, CameraDriverLayout] = {
    # Ours: realsense-ros's names under cameras/<view> (relative: in the robot's namespace), published reliably.
    "robopin": CameraDriverLayout(f"{CAMERA_ROOT}/{{view}}", "color/image_raw", "color/camera_info",
                                  "aligned_depth_to_color/image_raw", "depth/image_rect_raw", "depth/camera_info",
                                  "reliable"),
    # realsense-ros (ros2-development): the node is /<camera_namespace>/<camera_name> (defaults camera/camera,
    # README "Default behavior"); topics ~/color/image_raw, ~/aligned_depth_to_color/image_raw
    # (rs_node_setup.cpp), ~/depth/image_rect_raw; image QoS SYSTEM_DEFAULT (constants.h IMAGE_QOS).
    "realsense": CameraDriverLayout("/camera/{view}", "color/image_raw", "color/camera_info",
                                    "aligned_depth_to_color/image_raw", "depth/image_rect_raw", "depth/camera_info",
                                    "reliable"),
    # zed-ros2-wrapper (v5.1+ names, CHANGELOG.rst "Changed ZED Camera image topic names"): the node is
    # /<camera_name>/zed_node (zed_camera.launch.py: namespace = camera_name); ~/rgb/color/rect/image with
    # image_transport's ~/rgb/color/rect/camera_info, depth ~/depth/depth_registered registered to the left
    # (rgb) camera (zed_camera_component_video_depth.cpp); QoS rclcpp::QoS(10), reliable (QOS_QUEUE_SIZE).
    # Before v5.1 the color topic was ~/rgb/image_rect_color: give it as `color:` then.
    "zed": CameraDriverLayout("/{view}/zed_node", "rgb/color/rect/image", "rgb/color/rect/camera_info",
                              "depth/depth_registered", "", "", "reliable"),
}

_SETTINGS = ("driver", "prefix", "qos", "color", "info", "depth")


@dataclasses.dataclass(frozen=True)
class ViewTopics:
    """One view's resolved topic names and the QoS its publisher uses (``reliable`` or ``sensor_data``)."""

    view: str
    driver: str
    prefix: str
    qos: str
    color: str
    info: str
    depth: str
    raw_depth: str = ""
    raw_depth_info: str = ""

    def names(self, *, unaligned: bool = False) -> dict[str, str]:
        """``{color, info, depth}`` (``unaligned``: depth is ``raw_depth``, plus ``depth_info``)."""
        topics = {"color": self.color, "info": self.info, "depth": self.depth}
        if unaligned:
            if not self.raw_depth:
                raise CameraTopicsError(f"view {self.view!r}: driver {self.driver!r} publishes no unaligned depth "
                                        "(only depth registered to color)")
            topics["depth"] = self.raw_depth
            topics["depth_info"] = self.raw_depth_info
        return topics

    def all_names(self) -> tuple[str, ...]:
        """Every topic of the view (for a recorder): color, info, depth and the unaligned pair where there is one."""
        return tuple(t for t in (self.color, self.info, self.depth, self.raw_depth, self.raw_depth_info) if t)


def _join(prefix: str, name: str) -> str:
    return name if name.startswith("/") else f"{prefix.rstrip('/')}/{name}"


def view_topics(view: str, driver: str = "robopin", prefix: str = "", qos: str = "", *, color: str = "",
                info: str = "", depth: str = "", robopin_root: str = CAMERA_ROOT) -> ViewTopics:
    """The topics of ``view`` published by ``driver`` under ``prefix`` (empty: the driver's default) with ``qos``.

    ``qos`` empty takes the driver's own default. ``color`` / ``info`` / ``depth`` replace single names
    (relative ones are under the prefix). ``robopin_root`` is the root of our own driver's
    ``<root>/<view>`` layout (projection_node's ``camera_prefix``). Raises CameraTopicsError naming a bad value.
    """
    layout = CAMERA_DRIVERS.get(driver or "robopin")
    if layout is None:
        raise CameraTopicsError(f"view {view!r}: unknown camera driver {driver!r}; expected one of "
                                f"{sorted(CAMERA_DRIVERS)}")
    qos = qos or layout.qos
    if qos not in CAMERA_QOS:
        raise CameraTopicsError(f"view {view!r}: unknown camera qos {qos!r}; expected one of {list(CAMERA_QOS)}")
    if not prefix:
        default = layout.default_prefix
        if driver in ("", "robopin"):
            default = f"{robopin_root.rstrip('/')}/{{view}}"
        prefix = default.format(view=view)
    if not _PREFIX.match(prefix) or "//" in prefix:
        raise CameraTopicsError(f"view {view!r}: camera topic prefix {prefix!r} is not a ROS name")
    return ViewTopics(
        view=view, driver=driver or "robopin", prefix=prefix.rstrip("/"), qos=qos,
        color=_join(prefix, color or layout.color), info=_join(prefix, info or layout.info),
        depth=_join(prefix, depth or layout.depth),
        raw_depth=_join(prefix, layout.raw_depth) if layout.raw_depth else "",
        raw_depth_info=_join(prefix, layout.raw_depth_info) if layout.raw_depth_info else "",
    )


def prefix_topics(prefix: str, driver: str = "robopin") -> dict[str, str]:
    """``{color, info, depth}`` of ``driver``'s layout under ``prefix``, made absolute (e.g. a view in a bag)."""
    prefix = "/" + prefix.strip("/")
    return view_topics(prefix.rpartition("/")[2], driver, prefix).names()


def camera_topic_patterns(root: str = CAMERA_ROOT, driver: str = "robopin") -> tuple[str, ...]:
    """Glob patterns of every topic ``driver``'s layout gives a view under ``<root>/*`` (what a recorder takes)."""
    layout = CAMERA_DRIVERS[driver]
    names = (layout.color, layout.info, layout.depth, layout.raw_depth, layout.raw_depth_info)
    return tuple(f"{root.rstrip('/')}/*/{name}" for name in names if name)


def camera_topic_settings(cameras: Mapping[str, Any], views: tuple[str, ...] | list[str], *,
                          where: str = "cameras") -> dict[str, dict[str, str]]:
    """Validate a system file's ``cameras:`` section (view -> {driver, prefix, qos, color, info, depth}).

    Returns the settings as plain strings, each checked by resolving it with :func:`view_topics`; two
    views may not share a topic. Raises CameraTopicsError naming the view and the key.
    """
    if not isinstance(cameras, Mapping):
        raise CameraTopicsError(f"{where} must map view names to topic settings, got {cameras!r}")
    settings: dict[str, dict[str, str]] = {}
    for view, body in cameras.items():
        if view not in views:
            raise CameraTopicsError(f"{where}: {view!r} is not one of the views {list(views)}")
        if not isinstance(body, Mapping):
            raise CameraTopicsError(f"{where}.{view} must be a mapping of {list(_SETTINGS)}, got {body!r}")
        unknown = sorted(set(body) - set(_SETTINGS))
        if unknown:
            raise CameraTopicsError(f"{where}.{view} has unknown key(s) {unknown}; expected some of {list(_SETTINGS)}")
        settings[view] = {key: "" if body.get(key) is None else str(body.get(key)) for key in _SETTINGS if key in body}
        view_topics(view, **settings[view])
    owners: dict[str, str] = {}
    for view in views:
        for topic in view_topics(view, **settings.get(view, {})).all_names():
            if topic in owners:
                raise CameraTopicsError(f"{where}: views {owners[topic]!r} and {view!r} both use topic {topic!r}; "
                                        "give one of them its own prefix")
            owners[topic] = view
    return settings
