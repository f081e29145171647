"""``robopin trial … --workers N``: a batch's trials on N Ray actors, each with its own ROS domain, simulated world
and stack (one bring-up per system, the cell reset between trials, as :class:`~robopin_ros.trial_batch.TrialBatch`
runs them), on a local Ray bound to loopback or on a cluster (``--ray-address``).

The driver (this process) keeps the plan in order and hands each free worker the next trial; a worker writes its
trial folder under ``--out`` itself, and the driver prints the progress bar and rewrites ``results.md`` as each
trial finishes (so ``--resume`` continues a batch stopped anywhere). A worker that dies has its trial run again on
a new worker; a trial whose worker died twice is reported by name and counts as not succeeded.

Why Ray (PyPI ``ray``): actors are processes with their own environment (a ROS domain each, set before rclpy
starts), placed on one machine or a cluster by the same code, and a dead one is reported by its future
(``ray.exceptions.RayActorError``) rather than found by polling.

Ray is started by :func:`robopin.distributed.start_ray` (a local Ray on loopback, or the cluster at
``--ray-address``); on a cluster ``--out`` must be on a filesystem every node shares.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from robopin.distributed import start_ray
from robopin_ros.trial_batch import PlannedTrial, finish_batch, progress_line, write_results

__all__ = ["TrialWorker", "run_on_workers", "worker_domain"]

WORKER_ATTEMPTS = 2  # a trial whose worker dies is run once more on a new worker


def worker_domain(base: int, index: int) -> int:
    """Worker ``index``'s ROS domain: the ones after the batch's own (``base``), wrapping inside 1–101 (the domains
    whose ports every DDS vendor maps on Linux)."""
    low, high = 1, 101
    return low + (base - low + 1 + index) % (high - low + 1)


class TrialWorker:
    """One Ray actor: its own ROS domain, its output to ``workers/worker-<i>.log`` and a TrialBatch that runs the
    trials it is handed (sim systems only; the simulator judges)."""

    def __init__(self, args: argparse.Namespace, out: str, plan: list[PlannedTrial], *, command: str,
                 overrides: dict[str, str], domain_id: int, index: int) -> None:
        log = Path(out) / "workers" / f"worker-{index}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        # Every node of the stack logs to this process's stdout/stderr (rclpy writes to the descriptors).
        handle = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(handle, 1)
        os.dup2(handle, 2)
        os.close(handle)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's own stdout
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.environ["ROS_DOMAIN_ID"] = str(domain_id)
        from robopin.env import apply_ros_environment

        apply_ros_environment()
        from robopin_ros.trial_batch import TrialBatch

        self.index, self.domain_id = index, domain_id
        self.batch = TrialBatch(args, Path(out), plan, answers=None, command=command, overrides=overrides)

    def pid(self) -> int:
        return os.getpid()

    def run(self, position: int) -> dict[str, Any]:
        """Run the plan's trial at ``position``; its summary's row, or the exit code of a system that did not
        start."""
        planned = self.batch.plan[position]
        print(f"worker {self.index} (pid {os.getpid()}, ROS_DOMAIN_ID={self.domain_id}): {planned.trial_id}",
              flush=True)
        summary, _ = self.batch.run_planned(planned)
        if isinstance(summary, int):
            return {"start_failure": summary}
        return {"trial_id": planned.trial_id}

    def close(self) -> None:
        self.batch.close()


def run_on_workers(args: argparse.Namespace, out: Path, plan: list[PlannedTrial], *, command: str,
                   overrides: dict[str, str]) -> int:
    """Run ``plan`` on ``args.workers`` Ray actors; print progress, write results as trials finish; exit code as
    :meth:`TrialBatch.run`'s."""
    from robopin.trials.judging import finish_judged_trial, read_stack_verdict, sim_judgement
    from robopin.trials.log import read_trial

    pending: collections.deque[tuple[int, int]] = collections.deque()  # (plan position, attempt)
    done = 0
    for position, planned in enumerate(plan):
        folder = out / planned.trial_id
        summary, _ = read_trial(folder) if folder.is_dir() else (None, [])
        if summary is not None and args.resume:
            done += 1
        elif folder.exists() and read_stack_verdict(folder) is not None:  # stopped before its judgement was kept
            stack, _ = read_stack_verdict(folder)
            finish_judged_trial(folder, sim_judgement(stack))
            done += 1
        else:
            pending.append((position, 1))
    workers = max(1, min(int(args.workers), len(pending) or 1))
    # As many CPUs as workers: an actor asks for one, and a stack is mostly waiting on its simulated motion.
    ray = start_ray(args.ray_address, workers)
    base = int(os.environ["ROS_DOMAIN_ID"])
    actor_class = ray.remote(num_cpus=1, max_restarts=0)(TrialWorker)
    lost: list[str] = []
    running: dict[Any, tuple[int, int, int]] = {}  # future -> (plan position, attempt, worker index)
    actors: dict[int, Any] = {}
    started = 0

    def start_worker() -> int:
        nonlocal started
        index = started
        started += 1
        actors[index] = actor_class.remote(args, str(out), plan, command=command, overrides=overrides,
                                           domain_id=worker_domain(base, index), index=index)
        return index

    def hand_out(index: int) -> None:
        if pending:
            position, attempt = pending.popleft()
            running[actors[index].run.remote(position)] = (position, attempt, index)

    print(f"robopin trial: {len(pending)} trial(s) on {workers} Ray worker(s) "
          f"({'cluster ' + args.ray_address if args.ray_address else 'local, loopback'}); each worker's log in "
          f"{out / 'workers'}", flush=True)
    code = 0
    try:
        for _ in range(workers):
            hand_out(start_worker())
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            future = ready[0]
            position, attempt, index = running.pop(future)
            planned = plan[position]
            try:
                reply = ray.get(future)
            except ray.exceptions.RayActorError as error:
                actors.pop(index, None)
                if attempt < WORKER_ATTEMPTS:
                    print(f"robopin trial: worker {index} died running {planned.trial_id} ({type(error).__name__}); "
                          "running it again on a new worker", file=sys.stderr, flush=True)
                    shutil.rmtree(out / planned.trial_id, ignore_errors=True)  # what it had recorded: incomplete
                    pending.appendleft((position, attempt + 1))
                else:
                    lost.append(f"{planned.trial_id} (its worker died {attempt} times)")
                    print(f"robopin trial: {lost[-1]}", file=sys.stderr, flush=True)
                if pending:
                    hand_out(start_worker())
                continue
            except ray.exceptions.RayTaskError as error:  # the trial raised: named, the worker carries on
                lost.append(f"{planned.trial_id} ({error.cause!r})")
                print(f"robopin trial: {lost[-1]}; see {out / 'workers' / f'worker-{index}.log'}", file=sys.stderr,
                      flush=True)
                hand_out(index)
                continue
            if "start_failure" in reply:  # the system itself is wrong: every further trial would fail alike
                code = int(reply["start_failure"])
                pending.clear()
                continue
            done += 1
            summary, _ = read_trial(out / planned.trial_id)
            print(progress_line(done, len(plan), summary, f" [worker {index}]"), flush=True)
            write_results(out, command)
            hand_out(index)
    except KeyboardInterrupt:
        write_results(out, command)
        again = command if "--resume" in command.split() else f"{command} --resume"
        print(f"\nrobopin trial: stopped; finished trials are kept. Continue with: {again}", file=sys.stderr)
        return 130
    finally:
        for actor in actors.values():
            # A worker that died or hangs: its stack went with it, or goes with Ray.
            with contextlib.suppress(Exception):
                ray.get(actor.close.remote(), timeout=60)
        ray.shutdown()
    write_results(out, command)
    if code:
        return code
    result = finish_batch(out, plan, operator=False)
    if lost:
        print(f"robopin trial: not judged: {'; '.join(lost)}", file=sys.stderr)
        return 1
    return result
