"""What the VLM boundary costs per reasoning step, model time excluded, for two 640x480 views.

Stages: prompt building, image encoding, request body (JSON), the HTTP round trip to a local
server that answers at once with a canned RoboPIN-sized answer (~410 tokens, n samples with
logprobs), response parsing, and point conversion. Each figure is printed with its ratio to a
baseline measured in the same run (PNG at zlib's default level instead of JPEG; a new connection
per request instead of the pooled client), and the total with its ratio to RoboPIN's reported
0.281 s model time per sample. Nothing here passes or fails.

Run: .venv/bin/python benchmarks/bench_vlm.py
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
from PIL import Image

from robopin.stats import summarize
from robopin.vlm.base import SamplingParams, ViewImage
from robopin.vlm.images import encode_image
from robopin.vlm.openai_backend import OpenAIBackend, OpenAIBackendConfig
from robopin.vlm.points import PointConvention
from robopin.vlm.prompts import build_pincot_messages

ROBOPIN_MODEL_TIME_S = 0.281  # per sample, one A800 with vLLM (RoboPIN paper)
REPEATS = 30
SAMPLES = 4


def _answer_text(index: int) -> str:
    anchors = " ".join(
        f'step {k}: the cup <obj name="cup" id="obj_0{k}" img_idx="{k % 2}" point="[{300 + k}, {470 + k}]"> '
        f"is left of the plate and must move."
        for k in range(1, 9)
    )
    return f'<think>{anchors} sample {index}</think><answer>[{{"point_2d": [312, 476], "label": "cup"}}]</answer>'


def _canned_response(n: int) -> bytes:
    choices = []
    for index in range(n):
        text = _answer_text(index)
        words = text.split(" ")
        content = [{"token": w, "logprob": -0.05, "top_logprobs": [{"token": w, "logprob": -0.05}]} for w in words]
        choices.append(
            {
                "index": index,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": {"content": content},
            }
        )
    payload = {"model": "vlm", "choices": choices, "usage": {"prompt_tokens": 700, "completion_tokens": 410 * n}}
    return json.dumps(payload).encode()


class _CannedServer:
    def __init__(self, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall

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


def _views() -> list[ViewImage]:
    """Two camera-like frames: smooth shading plus sensor noise (noise is what makes JPEG work)."""
    rng = np.random.default_rng(0)
    views = []
    for index, name in enumerate(("static", "wrist")):
        u = np.linspace(0, 1, 640)[None, :, None]
        v = np.linspace(0, 1, 480)[:, None, None]
        base = 60 + 120 * u * np.array([1.0, 0.6, 0.3]) + 60 * v * np.array([0.2, 0.5, 1.0])
        rgb = np.clip(base + rng.normal(0, 4, (480, 640, 3)), 0, 255).astype(np.uint8)
        rgb[200:280, 250 + 40 * index : 330 + 40 * index] = (200, 30, 30)
        views.append(ViewImage(rgb, name=name, img_idx=index))
    return views


def _median_ms(function: Callable[[], object], repeats: int = REPEATS) -> float:
    function()  # warm-up: first-call imports and allocations are not per-step costs
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return 1000.0 * summarize(times).median


def _row(label: str, value_ms: float, baseline_ms: float | None = None, baseline_label: str = "") -> None:
    ratio = f"  x{value_ms / baseline_ms:6.3f} of {baseline_label} ({baseline_ms:.2f} ms)" if baseline_ms else ""
    print(f"{label:<44s} {value_ms:8.2f} ms{ratio}")


def main() -> None:
    views = _views()
    server = _CannedServer(_canned_response(SAMPLES))
    config = OpenAIBackendConfig(base_url=server.url, model="vlm", max_retries=0)
    backend = OpenAIBackend(config)
    messages = build_pincot_messages("put the cup on the middle plate", views)
    print(f"VLM boundary overhead per step: two 640x480 views, n={SAMPLES} samples with logprobs, median of {REPEATS}")

    prompt_ms = _median_ms(lambda: build_pincot_messages("put the cup on the middle plate", views))
    jpeg_ms = _median_ms(lambda: [encode_image(v.rgb, "jpeg", 90) for v in views])
    jpeg444_ms = _median_ms(lambda: [encode_image(v.rgb, "jpeg", 90, "4:4:4") for v in views])

    def png_default() -> list[bytes]:
        out = []
        for view in views:
            buffer = io.BytesIO()
            Image.fromarray(view.rgb).save(buffer, format="PNG")
            out.append(buffer.getvalue())
        return out

    png_default_ms = _median_ms(png_default, repeats=5)
    jpeg_bytes = sum(len(encode_image(v.rgb, "jpeg", 90)) for v in views)
    png_bytes = sum(len(b) for b in png_default())
    # n sampled traces, as E-TTS asks for them (its default temperature; vLLM refuses n > 1 greedy samples).
    sampling = SamplingParams(n=SAMPLES, temperature=0.7, logprobs=True, top_logprobs=1)
    body = backend.build_request(messages, sampling)
    request_ms = _median_ms(lambda: json.dumps(backend.build_request(messages, sampling)))
    serialise_ms = _median_ms(lambda: json.dumps(body))

    payload = json.loads(_canned_response(SAMPLES))
    parse_ms = _median_ms(lambda: backend.parse_response(payload, n=SAMPLES, logprobs=True, latency_s=0.0))
    convention = PointConvention("norm1000")
    points = np.array([[312, 476], [545, 623]] * 8, dtype=float)
    points_ms = _median_ms(lambda: convention.to_pixels(points, 640, 480))

    def pooled_step() -> object:
        return backend.generate(messages, sampling)

    step_ms = _median_ms(pooled_step)
    encoded = json.dumps(body).encode()

    def fresh_connection_post() -> object:
        with httpx.Client(timeout=10.0) as client:
            return client.post(f"{server.url}/chat/completions", content=encoded).json()

    def pooled_post_only() -> object:
        return backend._client.post("chat/completions", content=encoded).json()

    fresh_ms = _median_ms(fresh_connection_post)
    pooled_post_ms = _median_ms(pooled_post_only)

    _row("prompt building", prompt_ms)
    _row(f"image encoding, JPEG q90 4:2:0 ({jpeg_bytes / 1024:.0f} kB)", jpeg_ms, png_default_ms, "PNG default level")
    _row("image encoding, JPEG q90 4:4:4", jpeg444_ms, png_default_ms, "PNG default level")
    print(f"{'':<44s} (PNG default: {png_bytes / 1024:.0f} kB on the wire)")
    _row("request body incl. encoding + base64 + JSON", request_ms)
    _row("  of which JSON serialisation", serialise_ms)
    _row("HTTP round trip, pooled connection", pooled_post_ms, fresh_ms, "new connection per request")
    _row(f"response parsing (n={SAMPLES}, logprobs)", parse_ms)
    _row("point conversion (16 points)", points_ms)
    _row("full generate() step, model time excluded", step_ms)
    print(
        f"{'full step vs RoboPIN model time 0.281 s':<44s} x{step_ms / 1000.0 / ROBOPIN_MODEL_TIME_S:6.3f} "
        f"(goal: about 0.1, i.e. 30 ms)"
    )
    backend.close()
    server.stop()


if __name__ == "__main__":
    main()
