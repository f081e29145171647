"""The trial log: one JSON line per trial step and one summary per trial, in a folder per trial.

Layout of a trial folder (``<root>/<trial_id>/``)::

    steps.jsonl      one TrialStep per line (instruction, views, raw model output, parsed trace,
                     errors, targets, planner status and time, execution result, stage durations)
    summary.json     the TrialSummary (task, method, success or the named failure, totals)
    views/           PNG images of the views each step saw (referenced from steps.jsonl)
    bag/             the rosbag2 recording of the trial, when one was made

Everything is plain JSON so the report, notebooks and other tools read it without robopin.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "STAGES",
    "TrialLog",
    "TrialLogError",
    "TrialStep",
    "TrialSummary",
    "encode_png",
    "read_png",
    "read_trial",
    "trial_folders",
    "write_png",
]

STAGES = ("observe", "reason", "validate", "project", "plan", "execute")
_TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class TrialLogError(ValueError):
    """A trial log that cannot be written or read (bad id, a step after the summary, malformed JSON)."""


@dataclasses.dataclass
class TrialStep:
    """One step of a trial (one observe → reason → project → plan → execute cycle).

    ``durations_s`` holds the seconds each stage took (keys from :data:`STAGES`); ``stage_starts_s``
    when each began, relative to the trial start (for the timeline); ``views`` maps view name to the
    image file (relative to the trial folder); ``trace`` is the parsed PinCoT in plain JSON
    (anchors, answer points, valid, errors, warnings); ``error`` a named failure of this step.
    """

    step: int
    instruction: str
    views: dict[str, str] = dataclasses.field(default_factory=dict)
    raw_output: str = ""
    trace: dict[str, Any] = dataclasses.field(default_factory=dict)
    errors: list[str] = dataclasses.field(default_factory=list)
    targets: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    planner_status: str = ""
    planning_time_s: float = 0.0
    execution: str = ""
    durations_s: dict[str, float] = dataclasses.field(default_factory=dict)
    stage_starts_s: dict[str, float] = dataclasses.field(default_factory=dict)
    model: str = ""

    def __post_init__(self) -> None:
        unknown = set(self.durations_s) - set(STAGES)
        if unknown:
            raise TrialLogError(f"step {self.step}: unknown stage(s) {sorted(unknown)}; expected {STAGES}")
        for stage, seconds in self.durations_s.items():
            if not seconds >= 0:
                raise TrialLogError(f"step {self.step}: duration of {stage!r} must be >= 0 s, got {seconds!r}")


@dataclasses.dataclass
class TrialSummary:
    """The outcome of one trial: ``failure`` names why it failed (empty on success)."""

    trial_id: str
    task: str
    method: str
    success: bool
    failure: str = ""
    steps: int = 0
    duration_s: float = 0.0
    instruction: str = ""
    bag: str = ""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.success and self.failure:
            raise TrialLogError(f"trial {self.trial_id!r} cannot both succeed and fail with {self.failure!r}")
        if not self.success and not self.failure:
            raise TrialLogError(f"trial {self.trial_id!r} failed without a named failure; name it (e.g. 'no_path')")


def _check_rgb(rgb: np.ndarray) -> np.ndarray:
    image = np.asarray(rgb)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise TrialLogError(f"a view image must be HxWx3 uint8 RGB, got shape {image.shape} dtype {image.dtype}")
    return image


def encode_png(rgb: np.ndarray, level: int = 6) -> bytes:
    """An H×W×3 uint8 RGB image as PNG bytes (zlib ``level`` 0-9; 1 for live views)."""
    import cv2

    image = _check_rgb(rgb)
    ok, payload = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, level])
    if not ok:
        raise TrialLogError(f"OpenCV could not encode a {image.shape[1]}x{image.shape[0]} image as PNG")
    return payload.tobytes()


def write_png(path: str | Path, rgb: np.ndarray) -> Path:
    """Write an H×W×3 uint8 RGB image as PNG."""
    payload = encode_png(rgb)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return path


def read_png(path: str | Path) -> np.ndarray:
    """Read a PNG (such as :func:`write_png` writes) as H×W×3 uint8 RGB."""
    import cv2

    image = cv2.imdecode(np.frombuffer(Path(path).read_bytes(), np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise TrialLogError(f"{path}: not an image OpenCV can read")
    return np.ascontiguousarray(image[..., ::-1])


class TrialLog:
    """Writes one trial's folder: steps as they happen, the summary at the end."""

    def __init__(self, root: str | Path, trial_id: str) -> None:
        if not _TRIAL_ID.match(trial_id):
            raise TrialLogError(f"trial id {trial_id!r} must be letters, digits, '_', '-' or '.' (it names a folder)")
        self.trial_id = trial_id
        self.folder = Path(root) / trial_id
        self.folder.mkdir(parents=True, exist_ok=True)
        self._steps_path = self.folder / "steps.jsonl"
        self._closed = (self.folder / "summary.json").exists()

    def save_view(self, step: int, view: str, rgb: np.ndarray) -> str:
        """Save a view image of a step; return its path relative to the trial folder."""
        relative = f"views/step{step:03d}_{view}.png"
        write_png(self.folder / relative, rgb)
        return relative

    def add_step(self, step: TrialStep) -> None:
        if self._closed:
            raise TrialLogError(f"trial {self.trial_id!r} already has its summary; no more steps")
        with self._steps_path.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(dataclasses.asdict(step), allow_nan=False, default=_json_default) + "\n")

    def finish(self, summary: TrialSummary) -> Path:
        if summary.trial_id != self.trial_id:
            raise TrialLogError(f"summary is for trial {summary.trial_id!r}, this log is {self.trial_id!r}")
        path = self.folder / "summary.json"
        path.write_text(json.dumps(dataclasses.asdict(summary), indent=2, allow_nan=False, default=_json_default))
        self._closed = True
        return path


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def read_trial(folder: str | Path) -> tuple[TrialSummary | None, list[TrialStep]]:
    """Read a trial folder back: its summary (None while the trial runs) and its steps."""
    folder = Path(folder)
    steps: list[TrialStep] = []
    steps_path = folder / "steps.jsonl"
    if steps_path.exists():
        for number, line in enumerate(steps_path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                steps.append(TrialStep(**json.loads(line)))
            except (json.JSONDecodeError, TypeError) as error:
                raise TrialLogError(f"{steps_path}:{number}: not a trial step: {error}") from error
    summary_path = folder / "summary.json"
    summary = None
    if summary_path.exists():
        try:
            summary = TrialSummary(**json.loads(summary_path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, TypeError) as error:
            raise TrialLogError(f"{summary_path}: not a trial summary: {error}") from error
    return summary, steps


def trial_folders(root: str | Path) -> Iterator[Path]:
    """Every trial folder under ``root`` (any depth), sorted by path."""
    root = Path(root)
    found = {p.parent for p in root.rglob("summary.json")} | {p.parent for p in root.rglob("steps.jsonl")}
    yield from sorted(found)


def trace_to_json(trace: Any, image_sizes: Sequence[tuple[int, int]] | None = None) -> dict[str, Any]:
    """A parsed :class:`robopin.pincot.Trace` as plain JSON (with pixels when the view sizes are given)."""
    from robopin.pincot.coords import normalized_to_pixels

    def pixels(x: float, y: float, img_idx: int | None) -> list[float] | None:
        if image_sizes is None or img_idx is None or not 0 <= img_idx < len(image_sizes):
            return None
        return list(normalized_to_pixels(x, y, image_sizes[img_idx]))

    return {
        "valid": trace.valid,
        "think": trace.think,
        "answer": trace.answer,
        "anchors": [{"kind": a.kind, "name": a.name, "id": a.id, "img_idx": a.img_idx, "x": a.x, "y": a.y,
                     "uv": pixels(a.x, a.y, a.img_idx)} for a in trace.anchors],
        "answer_points": [{"x": p.x, "y": p.y, "img_idx": p.img_idx, "label": p.label, "id": p.id,
                           "uv": pixels(p.x, p.y, p.img_idx)} for p in trace.answer_points],
        "errors": [{"code": e.code, "message": e.message} for e in trace.errors],
        "warnings": [{"code": w.code, "message": w.message} for w in trace.warnings],
        "metrics": dict(trace.metrics),
    }
