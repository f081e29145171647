"""The message types a robopin bag may hold, for ``rosbags``: Jazzy's standard types plus our own.

``robopin_interfaces`` messages, and the control_msgs actions robopin's arm driver serves
(FollowJointTrajectory, GripperCommand and the messages they nest), are registered from their text; each
``.action`` adds the types rosidl derives from it (``<Name>_Goal``/``_Result``/``_Feedback``,
``_FeedbackMessage`` carried on ``<action>/_action/feedback``, and the send-goal / get-result request and
response); Foxglove's ``foxglove_msgs/msg/ImageAnnotations`` is registered so the recorder can write anchors
as image annotations. The type hashes ``rosbags`` computes from these definitions equal the ROS build's, so
``ros2 bag``, Foxglove and ``rosbags`` all read the bags written with them.
"""

from __future__ import annotations

import functools
import weakref
from pathlib import Path
from typing import Any

from robopin.env import REPO_ROOT, ament_prefix

__all__ = [
    "FOXGLOVE_DEFINITIONS",
    "InterfaceDefinitionsNotFoundError",
    "action_type_definitions",
    "connection_definition",
    "interface_directory",
    "robopin_typestore",
    "trim_cdr",
]

INTERFACE_PACKAGE = "robopin_interfaces"
# The control_msgs interfaces on robopin's graph: the real package's files in the image (ros-jazzy-control-msgs),
# ros2_ws/dev_only/control_msgs (the same definitions) in a development venv.
CONTROL_MSGS_FILES = ("msg/GripperCommand.msg", "msg/JointTolerance.msg", "msg/JointComponentTolerance.msg",
                      "action/FollowJointTrajectory.action", "action/GripperCommand.action")

# Foxglove's ROS 2 image-annotation schema (foxglove_msgs), written out because no Jazzy wheel ships it.
FOXGLOVE_DEFINITIONS: dict[str, str] = {
    "foxglove_msgs/msg/Color": "float64 r\nfloat64 g\nfloat64 b\nfloat64 a\n",
    "foxglove_msgs/msg/Point2": "float64 x\nfloat64 y\n",
    "foxglove_msgs/msg/CircleAnnotation": (
        "builtin_interfaces/Time timestamp\nfoxglove_msgs/Point2 position\nfloat64 diameter\nfloat64 thickness\n"
        "foxglove_msgs/Color fill_color\nfoxglove_msgs/Color outline_color\n"
    ),
    "foxglove_msgs/msg/PointsAnnotation": (
        "uint8 UNKNOWN=0\nuint8 POINTS=1\nuint8 LINE_LOOP=2\nuint8 LINE_STRIP=3\nuint8 LINE_LIST=4\n"
        "builtin_interfaces/Time timestamp\nuint8 type\nfoxglove_msgs/Point2[] points\n"
        "foxglove_msgs/Color outline_color\nfoxglove_msgs/Color[] outline_colors\nfoxglove_msgs/Color fill_color\n"
        "float64 thickness\n"
    ),
    "foxglove_msgs/msg/TextAnnotation": (
        "builtin_interfaces/Time timestamp\nfoxglove_msgs/Point2 position\nstring text\nfloat64 font_size\n"
        "foxglove_msgs/Color text_color\nfoxglove_msgs/Color background_color\n"
    ),
    "foxglove_msgs/msg/ImageAnnotations": (
        "foxglove_msgs/CircleAnnotation[] circles\nfoxglove_msgs/PointsAnnotation[] points\n"
        "foxglove_msgs/TextAnnotation[] texts\n"
    ),
}


class InterfaceDefinitionsNotFoundError(FileNotFoundError):
    """Neither the installed ``share/robopin_interfaces`` nor the source tree holds the .msg files."""


def interface_directory() -> Path:
    """Where the robopin_interfaces definitions are: the install prefix, else the source checkout."""
    candidates = [Path(ament_prefix()) / "share" / INTERFACE_PACKAGE, REPO_ROOT / "ros2_ws" / "src" / INTERFACE_PACKAGE]
    for candidate in candidates:
        if (candidate / "msg").is_dir():
            return candidate
    raise InterfaceDefinitionsNotFoundError(
        f"no {INTERFACE_PACKAGE} definitions in any of {[str(c) for c in candidates]}"
    )


def _split_sections(text: str, parts: int, source: str) -> list[str]:
    sections: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip() == "---":
            sections.append([])
        else:
            sections[-1].append(line)
    if len(sections) != parts:
        raise ValueError(f"{source}: expected {parts} sections separated by '---', found {len(sections)}")
    return ["\n".join(s) + "\n" for s in sections]


def action_type_definitions(package: str, name: str, text: str) -> dict[str, str]:
    """Message definitions rosidl derives from one ``.action`` file, keyed by full type name."""
    goal, result, feedback = _split_sections(text, 3, f"{package}/action/{name}")
    prefix = f"{package}/action/{name}"
    return {
        f"{prefix}_Goal": goal,
        f"{prefix}_Result": result,
        f"{prefix}_Feedback": feedback,
        f"{prefix}_FeedbackMessage": f"unique_identifier_msgs/UUID goal_id\n{prefix}_Feedback feedback\n",
        f"{prefix}_SendGoal_Request": f"unique_identifier_msgs/UUID goal_id\n{prefix}_Goal goal\n",
        f"{prefix}_SendGoal_Response": "bool accepted\nbuiltin_interfaces/Time stamp\n",
        f"{prefix}_GetResult_Request": "unique_identifier_msgs/UUID goal_id\n",
        f"{prefix}_GetResult_Response": f"int8 status\n{prefix}_Result result\n",
    }


def service_type_definitions(package: str, name: str, text: str) -> dict[str, str]:
    """The request and response message definitions of one ``.srv`` file."""
    request, response = _split_sections(text, 2, f"{package}/srv/{name}")
    return {f"{package}/srv/{name}_Request": request, f"{package}/srv/{name}_Response": response}


def _qualify(definition: str, package: str) -> str:
    """Prefix bare same-package type names (``Anchor[] anchors``) with the package, as rosidl resolves them."""
    primitive = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
                 "uint32", "int64", "uint64", "string", "wstring"}
    lines = []
    for line in definition.splitlines():
        stripped = line.split("#", 1)[0].strip()
        if not stripped or "=" in stripped.split()[1 if len(stripped.split()) > 1 else 0]:
            lines.append(line)
            continue
        field_type = stripped.split()[0]
        base = field_type.split("[", 1)[0].split("<=", 1)[0]
        if "/" not in base and base not in primitive and base[:1].isupper():
            lines.append(line.replace(field_type, f"{package}/{field_type}", 1))
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _package_definitions(package: str, paths: list[Path]) -> dict[str, str]:
    definitions: dict[str, str] = {}
    for path in paths:
        if path.suffix == ".msg":
            definitions[f"{package}/msg/{path.stem}"] = path.read_text()
        elif path.suffix == ".srv":
            definitions.update(service_type_definitions(package, path.stem, path.read_text()))
        elif path.suffix == ".action":
            definitions.update(action_type_definitions(package, path.stem, path.read_text()))
    return {name: _qualify(text, package) for name, text in definitions.items()}


def robopin_definitions(directory: Path | None = None) -> dict[str, str]:
    """Every message definition of robopin_interfaces (messages, service and action parts) by type name,
    plus the control_msgs ones robopin uses (when their files are found)."""
    directory = directory or interface_directory()
    paths = [p for kind, ext in (("msg", "msg"), ("srv", "srv"), ("action", "action"))
             for p in sorted((directory / kind).glob(f"*.{ext}"))]
    return {**control_msgs_definitions(), **_package_definitions(INTERFACE_PACKAGE, paths)}


@functools.lru_cache(maxsize=1)
def _control_msgs_directory() -> Path | None:
    installed, dev_only = Path(ament_prefix()) / "share" / "control_msgs", REPO_ROOT / "ros2_ws/dev_only/control_msgs"
    for candidate in (installed, dev_only):
        if all((candidate / name).is_file() for name in CONTROL_MSGS_FILES):
            return candidate
    return None


def control_msgs_definitions() -> dict[str, str]:
    """FollowJointTrajectory, GripperCommand and their nested messages by type name ({} if not found)."""
    directory = _control_msgs_directory()
    if directory is None:
        return {}
    return _package_definitions("control_msgs", [directory / name for name in CONTROL_MSGS_FILES])


@functools.lru_cache(maxsize=4)
def _cached_typestore(directory: str) -> Any:
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    typestore = get_typestore(Stores.ROS2_JAZZY)
    types: dict[str, Any] = {}
    for name, text in {**FOXGLOVE_DEFINITIONS, **robopin_definitions(Path(directory))}.items():
        types.update(get_types_from_msg(text, name))
    typestore.register(types)
    return typestore


def robopin_typestore(directory: Path | None = None) -> Any:
    """A ``rosbags`` Typestore with Jazzy's types, robopin_interfaces and Foxglove's image annotations.

    Built once per definitions directory and shared: treat it as read-only.
    """
    return _cached_typestore(str(directory or interface_directory()))


_SEPARATOR = "=" * 80 + "\n"


def _own_definition(typestore: Any, type_name: str) -> str:
    if "/msg/" in type_name:
        text, _ = typestore.generate_msgdef(type_name, ros_version=2)
        return text.split(_SEPARATOR, 1)[0]
    definitions = robopin_definitions()
    if type_name not in definitions:
        raise KeyError(f"no definition text for {type_name!r}")
    return definitions[type_name]


def _nested_types(definition: str) -> list[str]:
    nested = []
    for line in definition.splitlines():
        tokens = line.split("#", 1)[0].split()
        if len(tokens) < 2 or "/" not in tokens[0] or "=" in tokens[1]:
            continue
        name = tokens[0].split("[", 1)[0]
        parts = name.split("/")
        nested.append(name if len(parts) == 3 else f"{parts[0]}/msg/{parts[1]}")
    return nested


def message_definition(typestore: Any, type_name: str) -> str:
    """The ros2msg definition text (with every nested type after ``MSG:`` lines) rosbag2 stores per topic.

    ``rosbags`` generates these for ``pkg/msg/*`` types only; this also covers action and service
    parts (``pkg/action/Name_FeedbackMessage``), whose nested types keep their full names.
    """
    text = _own_definition(typestore, type_name)
    seen = {type_name}
    pending = _nested_types(text)
    while pending:
        nested = pending.pop(0)
        if nested in seen:
            continue
        seen.add(nested)
        body = _own_definition(typestore, nested)
        short = nested.replace("/msg/", "/")
        text += f"{_SEPARATOR}MSG: {short}\n{body}"
        pending.extend(_nested_types(body))
    return text


def connection_definition(typestore: Any, type_name: str) -> tuple[str, str]:
    """``(definition text, RIHS01 hash)`` of a type as a bag's connection records them, computed once per type.

    rosbags' ``Writer.add_connection`` generates both from the typestore for every connection of every bag
    when it is not handed them; recorder_node opens a bag per task with about twenty topics, and generating
    them cost ~140 ms of interpreter per bag, in the process the task's own step runs in.
    """
    cache = _DEFINITIONS.setdefault(typestore, {})
    known = cache.get(type_name)
    if known is None:
        if "/msg/" in type_name:
            text, _ = typestore.generate_msgdef(type_name, ros_version=2)
        else:  # rosbags generates pkg/msg/* definitions only; action and service parts get ours
            text = message_definition(typestore, type_name)
        known = cache[type_name] = (text, typestore.hash_rihs01(type_name))
    return known


_DEFINITIONS: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, str]]] = weakref.WeakKeyDictionary()


def trim_cdr(typestore: Any, data: bytes | memoryview, type_name: str) -> bytes:
    """``data`` cut to the CDR message it holds: what DDS delivers for the same message.

    ``rclpy.serialization.serialize_message`` on Jazzy's rmw_fastrtps_cpp (rmw_fastrtps_cpp/src/
    rmw_serialize.cpp) sets the buffer length to ``getEstimatedSerializedSize()``, an upper bound that
    counts alignment padding for empty sequences (a JointTrajectoryPoint's empty ``effort``), so its bytes
    end in padding no field owns. rclpy ignores it; rosbags refuses the message ("CDR message size
    mismatch") and so would any strict reader. Samples taken from DDS (``raw=True``) are already exact.
    """
    data = bytes(data)
    if len(data) < 4:
        raise ValueError(f"{type_name}: {len(data)} bytes is shorter than a CDR encapsulation header")
    msgdef = typestore.get_msgdef(type_name)
    # rosbags 0.11 (pinned): the generated deserializer returns the message and where it ended.
    read = msgdef.deserialize_cdr_le if data[1] else msgdef.deserialize_cdr_be
    _, end = read(data[4:], 0, msgdef.cls, typestore)
    return data[:4 + end]
