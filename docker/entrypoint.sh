#!/usr/bin/env bash
# Entry point of every robopin container: the ROS 2 environment, the Fast DDS profile, start-up checks,
# then the command (exec, so SIGINT/SIGTERM from `docker stop` reach the node and it stops the arm).
#   ROBOPIN_DDS_PROFILE   fastdds (default: UDP on loopback + shared memory, one machine)
#                         | fastdds_network (UDP on every interface + shared memory, several machines)
#   ROBOPIN_REQUIRE_CUROBO=1 (set in the CUDA image): refuse to start without a usable CUDA GPU and cuRobo,
#                         instead of failing later inside the motion planner.
set -eo pipefail  # no -u: ROS setup scripts read unset variables

ROS_DISTRO="${ROS_DISTRO:-jazzy}"
ROBOPIN_HOME="${ROBOPIN_HOME:-/opt/robopin}"
ROBOPIN_DATA_DIR="${ROBOPIN_DATA_DIR:-/data}"
# shellcheck disable=SC1090
source "${ROBOPIN_ROS_SETUP:-/opt/ros/${ROS_DISTRO}/setup.bash}"
# shellcheck disable=SC1091
source "${ROBOPIN_HOME}/ros2_ws/install/setup.bash"

profile_name="${ROBOPIN_DDS_PROFILE:-fastdds}"
profile="${ROBOPIN_HOME}/config/${profile_name}.xml"
if [[ ! -f "$profile" ]]; then
  echo "robopin-entrypoint: ROBOPIN_DDS_PROFILE=${profile_name} names no file ${profile}" >&2
  exit 2
fi
# Jazzy (Fast DDS 2.14) reads the FASTRTPS_ name, Kilted the FASTDDS_ one.
export FASTRTPS_DEFAULT_PROFILES_FILE="${FASTRTPS_DEFAULT_PROFILES_FILE:-$profile}"
export FASTDDS_DEFAULT_PROFILES_FILE="${FASTDDS_DEFAULT_PROFILES_FILE:-$profile}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"

# The profile maps a 32 MB shared-memory segment per DDS participant; Docker's default /dev/shm is 64 MB.
shm_kib="$(df -k --output=size /dev/shm 2>/dev/null | tail -n 1 | tr -d ' ' || echo 0)"
if [[ "${shm_kib:-0}" -lt 524288 ]]; then
  echo "robopin-entrypoint: warning: /dev/shm is $((shm_kib / 1024)) MiB; camera images need >= 512 MiB" \
       "(compose sets ipc: host; with docker run pass --ipc=host or --shm-size=1g)" >&2
fi

# Trials, bags and logs go to the data folder; Docker creates a missing bind-mount source owned by root.
if [[ -d "$ROBOPIN_DATA_DIR" && ! -w "$ROBOPIN_DATA_DIR" ]]; then
  echo "robopin-entrypoint: ${ROBOPIN_DATA_DIR} is not writable by uid $(id -u); on the host create the" \
       "folder before starting (mkdir -p trials) or chown it to uid $(id -u)" >&2
  exit 2
fi

if [[ "${ROBOPIN_REQUIRE_CUROBO:-0}" == "1" && "${ROBOPIN_SKIP_GPU_CHECK:-0}" != "1" ]]; then
  python3 - <<'PY'
import sys
from robopin.motion.curobo.planner import curobo_available

ok, why = curobo_available()
if not ok:
    sys.exit(f"robopin-entrypoint: cuRobo cannot run in this container: {why} "
             "(GPU passed through? compose: deploy.resources.reservations.devices; docker run: --gpus all)")
PY
fi

exec "$@"
