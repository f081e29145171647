"""The planner stack's own overhead per reasoning step, model time excluded, for two 640x480 views.

One point-mode step of :class:`robopin.reasoning.ReasoningLoop` (dry run) runs end to end in-process:
snapshot from the multi-view synchronizer → prompt and messages → request to an OpenAI-compatible
HTTP server on 127.0.0.1 that answers at once with a canned two-view RoboPIN trace (so the model's
time is zero and the round trip is pure stack cost) → parse and validate → projection of the pick and
place points with ``robopin.geometry`` → a motion stage that records only. Printed: the loop's own
per-stage timings (median over steps), and each component timed alone (image encoding, request body,
HTTP round trip, parse+validate, projection), each with its ratio to a baseline measured in the same
run: the irreducible work of a step (copy both views once, parse the answer with ``pincot.parse``).
The total is also compared with the goal (30 ms) and RoboPIN's 0.281 s model time per sample
(a published figure, not measured here). Nothing passes or fails.

The camera → DDS → snapshot path of the node is measured by bench_cameras.py; here the snapshot is
the in-process synchronizer the node's subscriber feeds.

Run: .venv/bin/python benchmarks/bench_planner.py
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from robopin.cameras import Frame, SnapshotConfig, SnapshotSynchronizer
from robopin.geometry import CameraModel, CameraMount, PointRequest, Projector, ViewConfig, make_transform
from robopin.pincot import parse, pointing_prompt
from robopin.reasoning import MotionOutcome, ReasoningConfig, ReasoningLoop, TaskRequest, interpret_pointing
from robopin.reasoning.snapshot_stages import SnapshotObserver, SnapshotProjector, observation_from_snapshot
from robopin.stats import summarize
from robopin.vlm.base import SamplingParams, ViewImage
from robopin.vlm.images import encode_image
from robopin.vlm.openai_backend import OpenAIBackend, OpenAIBackendConfig
from robopin.vlm.prompts import build_messages

ROBOPIN_MODEL_TIME_S = 0.281  # per sample, one A800 with vLLM (RoboPIN paper)
GOAL_MS = 30.0
STEPS = 25
REPEATS = 25
WIDTH, HEIGHT = 640, 480
VIEWS = ("static", "wrist")
CAMERA = CameraModel(WIDTH, HEIGHT, 500.0, 500.0, WIDTH / 2, HEIGHT / 2)
# Both cameras look straight down at a table 0.8 m / 0.5 m below them (every pixel has depth).
_DOWN = np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
MOUNTS = {
    "static": (make_transform(_DOWN, [0.5, 0.0, 0.8]), 0.8),
    "wrist": (make_transform(_DOWN, [0.45, 0.05, 0.5]), 0.5),
}


def _answer_text() -> str:
    """A RoboPIN-sized (~410 tokens) two-view trace: anchors in both views, pick and place answer."""
    sentences = [
        'I look at both images. In image 0 the <obj name="yellow duck" id="obj_01" img_idx="0" point="[312, 476]"> '
        'sits in front of two toys, the <obj name="brown teddy bear" id="obj_02" img_idx="0" point="[455, 380]"> and '
        'the <obj name="white teddy bear" id="obj_03" img_idx="0" point="[560, 385]">. A second '
        '<obj name="yellow duck" id="obj_04" img_idx="0" point="[700, 300]"> stands behind them.',
        'The wrist view shows obj_01 again: <obj name="yellow duck" id="obj_01" img_idx="1" point="[402, 611]">, '
        "and obj_02 and obj_03 are beside it, so obj_01 is the duck in front of the two toys, not obj_04.",
        'Three plates stand in a row: <space name="left plate" id="space_01" img_idx="0" point="[250, 760]">, '
        '<space name="middle plate" id="space_02" img_idx="0" point="[480, 770]"> and '
        '<space name="right plate" id="space_03" img_idx="0" point="[710, 765]">. The middle one is space_02.',
        "So I pick obj_01 from the top and place it at the centre of space_02, clear of obj_02 and obj_03. " * 3,
    ]
    answer = (
        '[{"point_2d": [312, 476], "label": "pick", "id": "obj_01", "img_idx": 0}, '
        '{"point_2d": [480, 770], "label": "place", "id": "space_02", "img_idx": 0}]'
    )
    return f"<think>{' '.join(sentences)}</think><answer>{answer}</answer>"


ANSWER = _answer_text()


class _CannedServer:
    """An OpenAI-compatible chat endpoint that answers every request at once with ANSWER."""

    def __init__(self) -> None:
        body = json.dumps(
            {
                "model": "vlm",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 700, "completion_tokens": 410},
            }
        ).encode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _frames(stamp_s: float) -> dict[str, Frame]:
    """Two camera-like color frames (shading + sensor noise) with flat depth."""
    rng = np.random.default_rng(0)
    frames = {}
    for index, name in enumerate(VIEWS):
        u = np.linspace(0, 1, WIDTH)[None, :, None]
        v = np.linspace(0, 1, HEIGHT)[:, None, None]
        base = 60 + 120 * u * np.array([1.0, 0.6, 0.3]) + 60 * v * np.array([0.2, 0.5, 1.0])
        rgb = np.clip(base + rng.normal(0, 4, (HEIGHT, WIDTH, 3)), 0, 255).astype(np.uint8)
        rgb[200:280, 250 + 40 * index : 330 + 40 * index] = (200, 30, 30)
        depth = np.full((HEIGHT, WIDTH), MOUNTS[name][1], dtype=np.float32)
        frames[name] = Frame(rgb, depth, CAMERA, stamp_s, camera_name=name, index=0)
    return frames


class _FeedingSynchronizer:
    """The synchronizer the node's camera subscriber feeds: new frames arrive before every snapshot."""

    def __init__(self) -> None:
        self.synchronizer = SnapshotSynchronizer(SnapshotConfig(VIEWS, max_age_s=5.0))
        self.template = _frames(time.time())
        self.index = 0

    def feed(self) -> None:
        self.index += 1
        stamp = time.time()
        for name, frame in self.template.items():
            self.synchronizer.add(
                name, Frame(frame.color, frame.depth_m, CAMERA, stamp, camera_name=name, index=self.index)
            )

    def snapshot(self):
        return self.synchronizer.snapshot()


class _RecordingMotion:
    def pick_place(self, pick, place, *, dry_run, on_stage, should_stop) -> MotionOutcome:
        on_stage("planning", "recorded only")
        return MotionOutcome(True, "success", "recorded", executed=False)


def _median_ms(function: Callable[[], object], repeats: int = REPEATS) -> float:
    function()  # warm-up: first-call imports and allocations are not per-step costs
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return 1000.0 * summarize(times).median


def _row(label: str, value_ms: float, baseline_ms: float) -> None:
    print(f"  {label:<46}{value_ms:9.2f} ms   x{value_ms / baseline_ms:7.2f} of baseline")


def main() -> None:
    server = _CannedServer()
    backend = OpenAIBackend(OpenAIBackendConfig(base_url=server.url, model="vlm", max_retries=0))
    feeder = _FeedingSynchronizer()
    projector = Projector([ViewConfig(name, i, CameraMount("static", MOUNTS[name][0])) for i, name in enumerate(VIEWS)])
    loop = ReasoningLoop(
        ReasoningConfig(view_roles={"static": "static camera", "wrist": "wrist camera"}),
        backend,
        SnapshotObserver(feeder.snapshot),
        SnapshotProjector(projector),
        _RecordingMotion(),
    )
    try:
        # --- baseline: what any step must do at least (hand both views over once, parse the answer)
        frames = feeder.template
        baseline_ms = _median_ms(lambda: ([f.color.copy() for f in frames.values()], parse(ANSWER, 2)))

        # --- the loop end to end, per-stage timings from the loop itself
        stage_times: dict[str, list[float]] = {}
        totals = []
        for _ in range(STEPS + 1):
            feeder.feed()
            started = time.perf_counter()
            result = loop.run(
                TaskRequest(
                    "Pick up the duck in front of two toys and place it on the middle plate", "point", dry_run=True
                )
            )
            elapsed = time.perf_counter() - started
            if not result.success:
                raise RuntimeError(f"benchmark step failed: {result.reason}: {result.message}")
            totals.append(elapsed)
            for name, seconds in result.steps[0].timings_s.items():
                stage_times.setdefault(name, []).append(seconds)
        totals = totals[1:]  # the first step warms up imports and connections
        stage_ms = {name: 1000.0 * summarize(values[1:]).median for name, values in stage_times.items()}
        total_ms = 1000.0 * summarize(totals).median

        # --- components alone
        snapshot = feeder.snapshot()
        observation = observation_from_snapshot(snapshot)
        views = [
            ViewImage(f.color, name=n, img_idx=i)
            for i, (n, f) in enumerate(zip(VIEWS, snapshot.ordered_frames(), strict=True))
        ]
        messages = build_messages(pointing_prompt("Pick up the duck", list(VIEWS)), views)
        requests = [PointRequest(200.0, 228.0, 0, "obj_01", "duck"), PointRequest(307.0, 370.0, 0, "space_02", "plate")]
        components = {
            "snapshot (synchronizer, 2 views)": _median_ms(lambda: (feeder.feed(), feeder.snapshot())),
            "prompt + messages": _median_ms(
                lambda: build_messages(pointing_prompt("Pick up the duck", list(VIEWS)), views)
            ),
            "image encoding (2 x JPEG q90)": _median_ms(lambda: [encode_image(v.rgb, "jpeg", 90) for v in views]),
            "request body (base64 + JSON)": _median_ms(
                lambda: json.dumps(backend.build_request(messages, SamplingParams(n=1)))
            ),
            "generate(): body + HTTP round trip (instant server)": _median_ms(lambda: backend.generate(messages)),
            "parse + validate (interpret_pointing)": _median_ms(lambda: interpret_pointing(ANSWER, observation)),
            "projection (2 points)": _median_ms(lambda: SnapshotProjector(projector).project(requests, observation)),
        }
    finally:
        backend.close()
        server.stop()

    print(f"planner stack overhead per step, two {WIDTH}x{HEIGHT} views, model time excluded")
    print(f"  baseline: copy both views + pincot.parse     {baseline_ms:9.2f} ms   x   1.00")
    print("loop stages (median of the loop's own timings over", STEPS, "dry-run steps):")
    labels = {
        "observe": "observe (snapshot → observation)",
        "reason_overhead": "prompt, encoding, body, parse, validate",
        "model": "request round trip (model answers at once)",
        "project": "project (2 points)",
        "motion": "motion stage (records only)",
    }
    for name, value in stage_ms.items():
        _row(labels.get(name, name), value, baseline_ms)
    _row("TOTAL step (wall, incl. feedback + logging)", total_ms, baseline_ms)
    print("components timed alone:")
    for name, value in components.items():
        _row(name, value, baseline_ms)
    print(f"  total vs goal {GOAL_MS:.0f} ms:                      x{total_ms / GOAL_MS:6.2f}")
    print(
        f"  total vs RoboPIN model time {ROBOPIN_MODEL_TIME_S * 1000:.0f} ms (published):  "
        f"x{total_ms / (ROBOPIN_MODEL_TIME_S * 1000):6.3f}"
    )


if __name__ == "__main__":
    main()
