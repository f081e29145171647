"""The catalogue of things a simulated workcell can contain: tabletop objects, plates and trays.

Each entry says how to make the body in pybullet (a URDF from ``pybullet_data`` or a primitive
shape), its scale, its colour and the words a task may use to refer to it (``duck``, ``toy``,
``yellow``, ``plate``). Scenario layouts draw instances from here by kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

COLORS_RGBA: dict[str, tuple[float, float, float, float]] = {
    "yellow": (0.95, 0.80, 0.10, 1.0),
    "red": (0.85, 0.15, 0.15, 1.0),
    "green": (0.20, 0.70, 0.25, 1.0),
    "blue": (0.15, 0.35, 0.85, 1.0),
    "white": (0.92, 0.92, 0.90, 1.0),
    "orange": (0.95, 0.50, 0.10, 1.0),
    "purple": (0.55, 0.25, 0.70, 1.0),
    "pink": (0.95, 0.55, 0.70, 1.0),
    "brown": (0.55, 0.35, 0.20, 1.0),
    "gray": (0.55, 0.55, 0.55, 1.0),
}
"""Named colours (RGBA, 0–1) objects and plates may be given; the names are what tasks say."""


class UnknownAssetError(KeyError):
    """An object kind or colour that the catalogue does not have."""


@dataclass(frozen=True)
class AssetSpec:
    """How to build one kind of object.

    Either ``urdf`` (a path inside pybullet_data, scaled by ``scale``) or ``primitive`` ("box" with
    ``size_m`` = full extents x, y, z; "cylinder" with ``size_m`` = (radius, radius, height)).
    ``graspable`` objects are dynamic; the rest (plates, trays) are fixed to the table.
    ``default_color`` None keeps the URDF's own texture colour.
    """

    kind: str
    words: tuple[str, ...]
    urdf: str | None = None
    primitive: str | None = None
    size_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    scale: float = 1.0
    base_rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Roll-pitch-yaw that stands the mesh upright before the instance's yaw is applied."""
    mass_kg: float = 0.1
    graspable: bool = True
    default_color: str | None = None
    colors: tuple[str, ...] = field(default_factory=tuple)
    footprint_radius_m: float = 0.04
    """Radius of a disc that holds the object's footprint; layouts keep these discs apart."""
    height_m: float = 0.05
    """Approximate resting height; grasps aim at half of it."""

    def __post_init__(self) -> None:
        if (self.urdf is None) == (self.primitive is None):
            raise ValueError(f"asset {self.kind!r}: give exactly one of urdf or primitive")
        if self.primitive not in (None, "box", "cylinder"):
            raise ValueError(f"asset {self.kind!r}: primitive must be 'box' or 'cylinder', got {self.primitive!r}")
        if self.scale <= 0:
            raise ValueError(f"asset {self.kind!r}: scale must be > 0, got {self.scale}")
        for color in (self.default_color, *self.colors):
            if color is not None and color not in COLORS_RGBA:
                raise UnknownAssetError(f"asset {self.kind!r}: unknown colour {color!r}")


# Scales keep every graspable object narrower than the Panda's 8 cm and the xArm gripper's 8.5 cm
# opening along at least one horizontal axis; toys are large enough to hide a duck behind them from
# the static camera (the multi-view task depends on that).
CATALOG: dict[str, AssetSpec] = {
    spec.kind: spec
    for spec in (
        AssetSpec(
            "duck",
            ("duck", "toy duck", "rubber duck"),
            urdf="duck_vhacd.urdf",
            scale=0.65,
            # duck.obj is modelled y-up and its URDF keeps that, so unturned the duck lies on its side
            # (about 7 x 7 cm across, wider than the Franka Hand's grasp leaves room for); a quarter
            # turn about x stands it on its base: 5.4 x 3.7 cm across, 5.0 cm tall at this scale.
            base_rpy=(1.5707963267948966, 0.0, 0.0),
            default_color="yellow",
            footprint_radius_m=0.04,
            height_m=0.05,
        ),
        # The teddy mesh lies on its back and its inertial frame is far off the mesh, so it topples
        # as a free body: it stands upright fixed to the table (tasks never move the toys).
        AssetSpec(
            "teddy",
            ("teddy", "teddy bear", "toy"),
            urdf="teddy_vhacd.urdf",
            scale=1.6,
            base_rpy=(1.5707963267948966, 0.0, 0.0),
            graspable=False,
            mass_kg=0.0,
            default_color="brown",
            colors=("brown", "pink", "orange"),
            footprint_radius_m=0.08,
            height_m=0.16,
        ),
        AssetSpec(
            "toy_block",
            ("block", "toy block", "toy"),
            primitive="box",
            size_m=(0.06, 0.06, 0.12),
            mass_kg=0.3,
            colors=("red", "blue", "green", "purple"),
            footprint_radius_m=0.045,
            height_m=0.12,
        ),
        AssetSpec(
            "cube",
            ("cube", "block"),
            primitive="box",
            size_m=(0.045, 0.045, 0.045),
            colors=("red", "green", "blue", "yellow", "orange"),
            footprint_radius_m=0.035,
            height_m=0.045,
        ),
        AssetSpec(
            "lego",
            ("lego", "lego brick"),
            urdf="lego/lego.urdf",
            scale=1.3,
            colors=("yellow", "red", "blue", "green"),
            footprint_radius_m=0.03,
            height_m=0.032,
        ),
        AssetSpec(
            "mug",
            ("mug", "cup"),
            urdf="objects/mug.urdf",
            scale=0.8,
            mass_kg=0.3,
            colors=("red", "blue", "white"),
            footprint_radius_m=0.06,
            height_m=0.085,
        ),
        AssetSpec(
            "ball",
            ("ball",),
            primitive="cylinder",
            size_m=(0.025, 0.025, 0.05),
            colors=("yellow", "orange", "red", "blue"),
            footprint_radius_m=0.035,
            height_m=0.05,
        ),
        AssetSpec(
            "plate",
            ("plate",),
            primitive="cylinder",
            size_m=(0.085, 0.085, 0.012),
            graspable=False,
            mass_kg=0.0,
            colors=("white", "yellow", "red", "green", "blue", "pink"),
            footprint_radius_m=0.085,
            height_m=0.012,
        ),
        AssetSpec(
            "tray",
            ("tray",),
            urdf="tray/traybox.urdf",
            scale=0.5,
            graspable=False,
            mass_kg=0.0,
            footprint_radius_m=0.16,
            height_m=0.035,
        ),
    )
}


def asset(kind: str) -> AssetSpec:
    """Return the catalogue entry for ``kind`` or raise :class:`UnknownAssetError` naming the choices."""
    try:
        return CATALOG[kind]
    except KeyError:
        raise UnknownAssetError(f"unknown object kind {kind!r}; expected one of {sorted(CATALOG)}") from None


def color_rgba(name: str) -> tuple[float, float, float, float]:
    """Return the RGBA of a named colour or raise :class:`UnknownAssetError`."""
    try:
        return COLORS_RGBA[name]
    except KeyError:
        raise UnknownAssetError(f"unknown colour {name!r}; expected one of {sorted(COLORS_RGBA)}") from None
