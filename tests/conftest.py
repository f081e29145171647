"""Shared pytest fixtures: one ROS domain per test run, loopback-only DDS, isolated rclpy contexts."""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

import pytest

from robopin.env import apply_ros_environment, test_domain_id

# Before anything imports rclpy: loopback discovery, the project's Fast DDS profile, logs in a temp
# dir, and a domain of our own so parallel runs on one machine never see each other.
_RUN_LOG_DIR = tempfile.mkdtemp(prefix="robopin-test-ros-log-")
_RUN_DOMAIN_ID = int(os.environ.get("ROBOPIN_TEST_DOMAIN_ID", test_domain_id()))
apply_ros_environment(domain_id=_RUN_DOMAIN_ID, log_dir=_RUN_LOG_DIR, localhost_only=True)
_module_index = itertools.count()
# Modules' domains are this far apart: a batch on N Ray workers runs its stacks in the N domains after its own
# (robopin_ros.trial_workers.worker_domain; the tests use 2), and a worker's process can outlive its batch by a
# moment, so the next module's domain is not one of them. Any stride below 101 (a prime) walks every domain.
_MODULE_STRIDE = 3

_SHM = Path("/dev/shm")


# Fast DDS 2.x (Jazzy) names its segments, port queues and their robust mutexes fastrtps_* and
# sem.fastrtps_*; Fast DDS 3 uses fastdds_*.
_SHM_PATTERNS = ("fastrtps_*", "sem.fastrtps_*", "fastdds_*", "sem.fastdds_*")


def _fastdds_shm_files() -> set[Path]:
    if not _SHM.is_dir():
        return set()
    return {path for pattern in _SHM_PATTERNS for path in _SHM.glob(pattern)}


def _remove_unused(paths: set[Path]) -> None:
    if not paths:
        return
    in_use = _mapped_shm_files()
    for path in paths:
        if path.name not in in_use:
            path.unlink(missing_ok=True)


def _mapped_shm_files() -> set[str]:
    """Names of /dev/shm files any live process still has mapped or open (so they must stay)."""
    in_use: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            maps = (proc / "maps").read_text(errors="replace")
        except OSError:
            continue
        for line in maps.splitlines():
            if "/dev/shm/" in line:
                in_use.add(line.rsplit("/", 1)[-1].replace(" (deleted)", ""))
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("/dev/shm/"):
                    in_use.add(target.rsplit("/", 1)[-1])
        except OSError:
            continue
    return in_use


@pytest.fixture(scope="session", autouse=True)
def _clean_dds_shared_memory():
    """Remove Fast DDS shared-memory files that no live process maps, before and after the run.

    A process killed with SIGKILL leaves its port queues and their robust mutexes behind; a new
    participant on the same ports then spins at 100 % CPU inside its constructor (seen here: a test
    hung in rclpy's Node() behind another run's leftovers). Files still mapped by anyone are kept.
    """
    _remove_unused(_fastdds_shm_files())
    yield
    _remove_unused(_fastdds_shm_files())


@pytest.fixture(scope="module", autouse=True)
def _ros_domain_per_module():
    """Give every test module a ROS domain of its own (child processes inherit it through os.environ).

    A process killed mid-test leaves its Fast DDS shared-memory port in a state that the surviving
    processes still map; a later participant probing that port in the same domain spun forever in
    rclpy's Node() (seen twice in full-suite runs). A fresh domain per module never probes those ports.
    """
    domain, lock = _claim_domain(1 + (_RUN_DOMAIN_ID - 1 + _MODULE_STRIDE * next(_module_index)) % 101)
    previous = os.environ.get("ROS_DOMAIN_ID")
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    try:
        yield domain
    finally:
        lock.close()  # closing the file releases the flock
        if previous is None:
            os.environ.pop("ROS_DOMAIN_ID", None)
        else:
            os.environ["ROS_DOMAIN_ID"] = previous


def _claim_domain(first: int):
    """The first domain from ``first`` on (1..101, wrapping) that no other test run of this host holds, and the
    open lock file that holds it for this run.

    Every run walks all 101 domains over its ~150 modules, so two runs on one machine (a developer's targeted
    run beside a full one) would meet in a domain sooner or later and see each other's nodes (a second stack in
    the namespace, answers from the other run's servers). An flock is released by the kernel when its holder
    exits, however it ends: a killed run holds nothing.
    """
    import fcntl

    for offset in range(101):
        domain = 1 + (first - 1 + offset) % 101
        lock = open(Path(tempfile.gettempdir()) / f"robopin-test-ros-domain-{domain}.lock", "a")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return domain, lock
    raise RuntimeError("every ROS domain 1..101 is held by another test run of this host")


@pytest.fixture(autouse=True)
def _scheduling_policy_unchanged():
    """Fail a test that leaves the runner's thread on another scheduling policy, and put it back.

    Child processes inherit the policy of the thread that starts them: a runner left on SCHED_FIFO 99
    (libfranka does that to its caller) spawned real-time nodes whose busy loops starved the machine,
    and the suite stalled until CI's limit.
    """
    from robopin.robots.scheduling import set_thread_scheduling, thread_scheduling

    # pthreads' view, not os.sched_getscheduler: glibc's record is what later threads inherit.
    before = thread_scheduling()
    yield
    after = thread_scheduling()
    if before is not None and after != before:
        set_thread_scheduling(*before)
        pytest.fail(f"the test left the test runner's thread on scheduling {after}, not {before} (now restored)")


@pytest.fixture
def ros_env() -> dict[str, str]:
    """Environment for a child process that must join this test run's ROS graph."""
    return dict(os.environ)


@pytest.fixture
def ros_context():
    """An initialised rclpy Context of its own, shut down after the test."""
    import rclpy
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        if context.ok():
            rclpy.shutdown(context=context)
