"""How long parsing and validating one PinCoT trace takes, next to the model time it rides on.

Prints, for a ~400-token two-view pick-and-place trace (RoboPIN emits 411.67 tokens per sample):
the time of ``parse`` (structure, anchors, IDs, answer, all metrics), the same-run baseline of the
bare minimum any consumer must do (RoboPIN's released anchor regex plus ``json.loads`` of the answer),
and the ratio of our time to RoboPIN's 0.281 s per sample on vLLM/A800. Also times drawing the trace
on two 640x480 views. Never pass/fail.

Run: .venv/bin/python benchmarks/bench_pincot.py
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable

import numpy as np

from robopin.pincot import TraceWriter, draw_trace, parse
from robopin.stats import summarize

ROBOPIN_SECONDS_PER_SAMPLE = 0.281
ROBOPIN_TOKENS_PER_SAMPLE = 411.67
CHARS_PER_TOKEN = 4.0  # rule of thumb for English text with Qwen-style BPE tokenizers
# RoboPIN's released data filter regex (the least a consumer of the format can run).
RELEASED_FILTER = re.compile(r'<(?P<kind>obj|space)\s+[^>]*id="(?P<id>[^"]+)"[^>]*point="\[[^\]]+\]"[^>]*>')


def build_trace() -> str:
    """A realistic two-view trace: 6 entities, re-tags across views, bare-ID steps, JSON answer."""
    w = TraceWriter(num_views=2)
    w.say("The task is to put the yellow duck into the blue bowl without touching the mug. In the static view I see ")
    duck = w.pin("obj", "yellow duck", 0, 412, 530)
    w.say(" near the front edge, ")
    bowl = w.pin("obj", "blue bowl", 0, 655, 402)
    w.say(" at the back right, and ")
    mug = w.pin("obj", "white mug", 0, 540, 455)
    w.say(" between them. There is also ")
    w.pin("obj", "red block", 0, 220, 610)
    w.say(" on the left, which does not matter for this task. Step 1: the gripper must reach ")
    w.refer(duck)
    w.say(" from above; ")
    w.refer(mug)
    w.say(" is about 12 cm to its right, so a straight top-down grasp keeps clear of it. In the wrist view ")
    w.pin("obj", "yellow duck", 1, 498, 611)
    w.say(" is centred and slightly below the optical axis, and ")
    w.pin("obj", "white mug", 1, 812, 377)
    w.say(" appears at the right border, confirming the gap. Step 2: the place target is inside ")
    w.refer(bowl)
    w.say("; its free centre is ")
    place = w.pin("space", "free centre of the blue bowl", 0, 660, 395)
    w.say(". The rim is high on the left side, so I place at ")
    w.refer(place)
    w.say(" and lower slowly. Step 3: after lifting ")
    w.refer(duck)
    w.say(" by 10 cm, move over ")
    w.refer(mug)
    w.say(" with margin, then descend into ")
    w.refer(place)
    w.say(". Nothing else blocks the path between ")
    w.refer(duck)
    w.say(" and ")
    w.refer(bowl)
    w.say(
        ", so the plan is a single pick-and-place with a high transfer arc. The grasp point is the duck's body centre."
    )
    w.answer_anchor(duck, label="pick")
    w.answer_anchor(place, label="place")
    return w.text()


def per_call_seconds(function: Callable[[], object], *, budget_s: float = 1.5, repeats: int = 7) -> tuple[float, float]:
    """(wall, CPU) seconds of one call: medians over ``repeats`` batches sized to fit the budget.

    CPU time (this process only) is reported alongside wall time because the machine may be shared:
    under load the wall clock also counts time spent waiting for a core.
    """
    start = time.perf_counter()
    function()
    single = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(budget_s / repeats / single))
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(number):
            function()
        wall.append((time.perf_counter() - start) / number)
        cpu.append((time.process_time() - start_cpu) / number)
    return summarize(wall).median, summarize(cpu).median


def main() -> None:
    text = build_trace()
    trace = parse(text, 2)
    assert trace.valid, trace.errors  # the benchmark input itself must be a valid trace
    approx_tokens = len(text) / CHARS_PER_TOKEN
    print(
        f"trace: {len(text)} characters (~{approx_tokens:.0f} tokens at {CHARS_PER_TOKEN:g} chars/token; "
        f"RoboPIN averages {ROBOPIN_TOKENS_PER_SAMPLE} tokens), {len(trace.anchors)} anchors, "
        f"{len(trace.references)} references, {len(trace.answer_points)} answer points"
    )
    answer = trace.answer

    def baseline() -> object:
        return [(m["kind"], m["id"]) for m in RELEASED_FILTER.finditer(text)], json.loads(answer)

    baseline_wall, baseline_cpu = per_call_seconds(baseline)
    parse_wall, parse_cpu = per_call_seconds(lambda: parse(text, 2))
    print(
        f"baseline (released anchor regex + json.loads): {baseline_wall * 1e6:8.1f} us wall, "
        f"{baseline_cpu * 1e6:8.1f} us CPU"
    )
    print(
        f"parse + validate + metrics:                    {parse_wall * 1e6:8.1f} us wall, "
        f"{parse_cpu * 1e6:8.1f} us CPU "
        f"({parse_cpu / baseline_cpu:.1f}x the baseline's CPU)"
    )
    for label, seconds in (("wall", parse_wall), ("CPU", parse_cpu)):
        print(
            f"parse {label} time / RoboPIN's {ROBOPIN_SECONDS_PER_SAMPLE} s per sample (vLLM, A800): "
            f"{seconds / ROBOPIN_SECONDS_PER_SAMPLE:.5f} = {100 * seconds / ROBOPIN_SECONDS_PER_SAMPLE:.3f} % "
            "(goal: under 1 ms = 0.36 %)"
        )
    images = [np.zeros((480, 640, 3), np.uint8), np.zeros((480, 640, 3), np.uint8)]
    copy_wall, copy_cpu = per_call_seconds(lambda: [image.copy() for image in images], budget_s=0.5)
    draw_wall, draw_cpu = per_call_seconds(lambda: draw_trace(images, trace), budget_s=1.5)
    print(f"baseline (copy two 640x480 views):            {copy_wall * 1e6:8.1f} us wall, {copy_cpu * 1e6:8.1f} us CPU")
    print(
        f"draw_trace on two 640x480 views:              {draw_wall * 1e6:8.1f} us wall, {draw_cpu * 1e6:8.1f} us CPU "
        f"({draw_cpu / copy_cpu:.1f}x the copy's CPU; "
        f"{100 * draw_cpu / ROBOPIN_SECONDS_PER_SAMPLE:.2f} % of a model sample)"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} cores, 1-minute load average {load:.1f}")


if __name__ == "__main__":
    main()
