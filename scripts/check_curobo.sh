#!/usr/bin/env bash
# First step on a machine with an NVIDIA GPU and cuRobo (the CUDA image): check the cuRobo backend
# against cuRobo itself before any robot moves. Prints, in order:
#   1. the GPU, torch and cuRobo versions (exit 1 when cuRobo cannot run here);
#   2. the cuRobo contract tests: the robot configs read by cuRobo's rules (these also run without a
#      GPU) and the planner contract with cuRobo itself (skipped without one);
#   3. per robot (Panda, FR3, xArm 6): MotionGen build and warm-up time, success and planning time
#      median / p95 on the tabletop problems, every plan through robopin's dense collision check;
#   4. the CPU planners on the same problems (bench_motion --quick) as this machine's baseline.
# Usage: scripts/check_curobo.sh [ROBOT ...]     (default: panda fr3 xarm6)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
ROBOTS=("$@")
[ ${#ROBOTS[@]} -gt 0 ] || ROBOTS=(panda fr3 xarm6)

echo "=== 1. GPU, torch, cuRobo"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    || echo "nvidia-smi not found"
"$PYTHON" - <<'PY'
import sys
from robopin.motion.curobo.planner import curobo_available
ok, why = curobo_available()
if not ok:
    print(f"cuRobo cannot run here: {why}")
    sys.exit(1)
import curobo
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
print("curobo", getattr(curobo, "__version__", "unknown"))
PY

echo "=== 2. cuRobo contract tests"
if "$PYTHON" -c "import pytest, pytest_timeout, hypothesis" 2>/dev/null; then
    "$PYTHON" -m pytest tests/motion/test_curobo_configs.py tests/motion/test_curobo.py -q -rs \
        --timeout=1800 --timeout-method=thread -p no:cacheprovider
else
    # The CUDA image leaves test tools out (docker/install-requirements.sh); the pins are requirements/base.txt's.
    echo "pytest is not installed here: $PYTHON -m pip install $(grep -E '^(pytest|pytest-timeout|hypothesis)==' \
        requirements/base.txt | tr '\n' ' ')and run this again"
    exit 1
fi

echo "=== 3. cuRobo on the tabletop problems: ${ROBOTS[*]}"
"$PYTHON" -m robopin.motion.curobo.gpu_check --robots "${ROBOTS[@]}"

echo "=== 4. CPU planners on the same problems (baseline on this machine)"
"$PYTHON" benchmarks/bench_motion.py --quick
