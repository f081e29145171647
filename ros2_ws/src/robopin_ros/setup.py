"""ament_python package of the robopin ROS 2 nodes.

Every module ``robopin_ros/<name>_node.py`` that defines ``main()`` becomes the console script
``<name>_node`` (``ros2 run robopin_ros <name>_node``), so adding a node needs no edit here. The launch
files (``launch/``) and the repository's system files and DDS profiles (``config/``, when this package is
built from a checkout or an image that has it) go into the package share, where ``ros2 launch
robopin_ros robopin.launch.py`` finds them.
"""

import ast
import os
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "robopin_ros"
HERE = Path(__file__).resolve().parent


CONFIG = HERE.parents[2] / "config"  # the repository's config/ (ros2_ws/src/robopin_ros -> repository root)


def share_files() -> list[tuple[str, list[str]]]:
    """Launch files and, when present, the system files, scenarios and DDS profiles, for share/robopin_ros."""
    def relative(paths):
        return [os.path.relpath(path, HERE) for path in sorted(paths)]

    files = [(f"share/{PACKAGE}/launch", relative((HERE / "launch").glob("*.launch.py")))]
    if CONFIG.is_dir():
        files.append((f"share/{PACKAGE}/config", relative([*CONFIG.glob("*.yaml"), *CONFIG.glob("*.xml")])))
        files.append((f"share/{PACKAGE}/config/scenarios", relative((CONFIG / "scenarios").glob("*"))))
    return [(target, sources) for target, sources in files if sources]


def node_entry_points() -> list[str]:
    """Return console-script specs for every *_node.py module that defines a top-level main()."""
    scripts = []
    for module in sorted((HERE / PACKAGE).glob("*_node.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            scripts.append(f"{module.stem} = {PACKAGE}.{module.stem}:main")
    return scripts


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *share_files(),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="robopin maintainers",
    maintainer_email="maintainers@robopin.dev",
    description="Thin rclpy nodes of the robopin stack.",
    license="Apache-2.0",
    entry_points={"console_scripts": node_entry_points()},
)
