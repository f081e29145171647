"""Named model errors at set rates, applied to the oracle's text (the imperfect-model simulator).

The oracle never errs; a real VLM does, and the stack's checks exist for that. The oracle backend
(:mod:`robopin.sim.oracle_backend`, types ``oracle`` and ``imperfect``) writes the oracle's trace and this
module makes the mistakes RoboPIN measures, each one named and drawn from its own rate with a seeded generator
(the same seed and request give the same text):

- ``pin_noise_px``: Gaussian noise (standard deviation, pixels) on every pin.
- ``anchor_error``: per reasoning anchor, the pin lands on another object visible in that view
  (the answer's own anchors are left as they are: what the answer does is ``answer_error_*``).
- ``answer_error_correct_anchors`` / ``answer_error_faulty_anchor``: the answer picks another object
  (valid format, wrong entity), at one rate when every anchor is right and at another when one is not.
- ``wrong_view``: an answer point keeps its pixel but names another image (``img_idx``).
- ``view_id_change``: an entity seen in a second view gets a new ID there (the shared ID is lost).
- ``step_id_drop``: a later mention of an entity uses words instead of its bare ID.
- ``anchor_drop``: an entity the answer does not use is mentioned in words, never pinned.
- ``broken_tag``: one anchor tag loses its closing quote and ``>``.
- ``missing_answer``: the ``</answer>`` close is never written.
- ``hallucination``: an entity the scene does not have is pinned on the bare table.
- ``early_done``: the answer says ``done`` while a goal remains.
- ``verifier_error``: ``score_yes_no`` (E-TTS's reasoning verifier) gives the wrong verdict.

Presets (``preset``) come from the RoboPIN paper's Tables 3-5: ``robopin`` — anchor
correctness 89.1 %, cross-step ID coverage 99.9 %, anchor coverage 100 %, shared-ID transfer
86.3 %, answer error 13.2 % with correct anchors and 29.2 % with a faulty one; ``without_rft``
(RoboPIN before reinforcement fine-tuning) — anchor correctness 87.0 %, cross-step ID coverage
18.8 %, anchor coverage 96.3 %, shared-ID transfer 60.6 % (RoboPIN reports the answer-error split
for the full model only, so this preset keeps it). Errors RoboPIN gives no figure for (pin noise,
wrong view, broken tags, missing answers, hallucinations, early done, verifier errors) are 0 in
both presets; set them per system file (``rates``). ``oracle`` is no error at all.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from robopin.pincot.coords import pixel_index_to_normalized
from robopin.vlm.base import YesNoScore
from robopin.vlm.errors import VLMConfigError

ERROR_TYPES = (
    "pin_noise_px", "anchor_error", "answer_error_correct_anchors", "answer_error_faulty_anchor", "wrong_view",
    "view_id_change", "step_id_drop", "anchor_drop", "broken_tag", "missing_answer", "hallucination", "early_done",
    "verifier_error",
)  # fmt: skip
HALLUCINATED = ("green bottle", "banana", "silver spoon", "blue scissors")
"""Things the simulated scenes never hold, for ``hallucination``."""

_TAG = re.compile(r'<(obj|space) name="([^"]*)" id="([^"]*)" img_idx="(\d+)" point="\[(-?[\d.]+), (-?[\d.]+)\]">')
_BARE = re.compile(r'(?<![\w"])((?:obj|space)_\d+)(?![\w"])')


@dataclass(frozen=True)
class ModelErrorRates:
    """Rates of each named error (probabilities in [0, 1]; ``pin_noise_px`` in pixels)."""

    pin_noise_px: float = 0.0
    anchor_error: float = 0.0
    answer_error_correct_anchors: float = 0.0
    answer_error_faulty_anchor: float = 0.0
    wrong_view: float = 0.0
    view_id_change: float = 0.0
    step_id_drop: float = 0.0
    anchor_drop: float = 0.0
    broken_tag: float = 0.0
    missing_answer: float = 0.0
    hallucination: float = 0.0
    early_done: float = 0.0
    verifier_error: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise VLMConfigError(f"model error rate {f.name} must be a number, got {value!r}")
            if f.name == "pin_noise_px":
                if value < 0:
                    raise VLMConfigError(f"pin_noise_px must be >= 0, got {value!r}")
            elif not 0.0 <= value <= 1.0:
                raise VLMConfigError(f"model error rate {f.name} must be in [0, 1], got {value!r}")

    @classmethod
    def of(cls, preset: str, overrides: Mapping[str, Any] | None = None) -> ModelErrorRates:
        """A preset's rates with ``overrides`` applied, naming an unknown preset or error type."""
        if preset not in PRESETS:
            raise VLMConfigError(f"unknown model preset {preset!r}; expected one of {sorted(PRESETS)}")
        overrides = dict(overrides or {})
        unknown = sorted(set(overrides) - set(ERROR_TYPES))
        if unknown:
            raise VLMConfigError(f"unknown model error type(s) {unknown}; expected some of {list(ERROR_TYPES)}")
        return replace(PRESETS[preset], **overrides)


PRESETS: dict[str, ModelErrorRates] = {
    "oracle": ModelErrorRates(),
    # RoboPIN paper, Table 3 AC 89.1 %, CS-IDCov 99.9 %, A-Cov 100 %; Table 5 ID-Trans 86.3 %;
    # Table 4 answer error 13.2 % (correct anchors) vs 29.2 % (faulty anchor).
    "robopin": ModelErrorRates(
        anchor_error=1 - 0.891,
        step_id_drop=1 - 0.999,
        view_id_change=1 - 0.863,
        answer_error_correct_anchors=0.132,
        answer_error_faulty_anchor=0.292,
    ),
    # RoboPIN paper, w/o RFT: Table 3 AC 87.0 %, CS-IDCov 18.8 %, A-Cov 96.3 %; Table 5 ID-Trans 60.6 %.
    "without_rft": ModelErrorRates(
        anchor_error=1 - 0.870,
        step_id_drop=1 - 0.188,
        anchor_drop=1 - 0.963,
        view_id_change=1 - 0.606,
        answer_error_correct_anchors=0.132,
        answer_error_faulty_anchor=0.292,
    ),
}


def draw_errors(backend, oracle, seed: int) -> None:
    """Start the error draws of one sample: its own generator, and the pin noise on the oracle."""
    # The layout's seed joins the backend's, so each layout of a batch (a fresh backend per trial, all with
    # the same configured seed) gets draws of its own.
    layout_seed = int(getattr(oracle.scene, "seed", 0))
    backend._rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, layout_seed & 0xFFFFFFFF, backend._calls])
    rates = backend.rates
    oracle.errors = replace(oracle.errors, point_jitter_px=max(oracle.errors.point_jitter_px, rates.pin_noise_px))


def degraded_pointing(backend, oracle, rendered) -> str:
    """One PinCoT sample with the backend's model errors (the names go to ``backend.injected``)."""
    rates, rng = backend.rates, backend._rng
    trace = oracle.write(rendered)
    # Each reasoning anchor (not the answer's own) is wrong at anchor_error; whether the answer goes
    # wrong depends on that (RoboPIN's answer error with a faulty vs correct anchor).
    candidates = _Degrader(rates, rng, oracle, rendered, trace, []).reasoning_anchors()
    faulty = sum(1 for _ in candidates if rng.random() < rates.anchor_error)
    wrong = rates.answer_error_faulty_anchor if faulty else rates.answer_error_correct_anchors
    if wrong > 0 and rng.random() < wrong and oracle.next_goal() is not None:
        oracle.errors = replace(oracle.errors, wrong_target_probability=1.0)
        trace = oracle.write(rendered)
    injected = list(trace.injected)
    text = _Degrader(rates, rng, oracle, rendered, trace, injected).apply(faulty)
    backend.injected.append(tuple(injected))
    return text


def degraded_other(backend, oracle, text: str) -> str:
    """R^3 and RoboGPT-R1 texts: an early ``done`` and a missing answer are the errors that apply."""
    rates, rng = backend.rates, backend._rng
    injected = []
    early = oracle.next_goal() is not None and rates.early_done and rng.random() < rates.early_done
    if early and "Instruction:" in text:
        text = re.sub(r"Instruction: .*$", "Instruction: done", text)
        injected.append("early done")
    if rates.missing_answer and rng.random() < rates.missing_answer:
        text = text.rsplit("Instruction:", 1)[0] if "Instruction:" in text else text[: len(text) // 2]
        injected.append("missing answer")
    backend.injected.append(tuple(injected))
    return text


def degraded_verdict(backend, score: YesNoScore, judged: str = "", layout_seed: int = 0) -> YesNoScore:
    """E-TTS's reasoning verifier gives the wrong verdict at ``verifier_error``.

    The draw is a function of the backend's seed, the layout and the judged trace (``judged``), not of how
    many verdicts came before: E-TTS asks for its verdicts concurrently, in no fixed order, and a trial must
    draw alike whatever ran before it. The same trace gets the same verdict, as a model scoring yes/no
    logprobs does.
    """
    key = zlib.crc32(judged.encode("utf-8"))
    rng = np.random.default_rng([int(backend.config.seed) & 0xFFFFFFFF, int(layout_seed) & 0xFFFFFFFF, key, 1])
    if backend.rates.verifier_error and rng.random() < backend.rates.verifier_error:
        return YesNoScore(score.logprob_no, score.logprob_yes, exact=score.exact)
    return score


class _Degrader:
    """Applies the text-level errors to one oracle trace."""

    def __init__(self, rates, rng, oracle, rendered, trace, injected: list[str]) -> None:  # noqa: PLR0917
        self.rates, self.rng, self.oracle, self.rendered = rates, rng, oracle, rendered
        self.trace, self.injected = trace, injected
        self.think, _, rest = trace.text.partition("</think>")
        self.think = self.think.removeprefix("<think>")
        self.answer = rest.removeprefix("<answer>").removesuffix("</answer>")

    def chance(self, rate: float) -> bool:
        return bool(rate > 0 and self.rng.random() < rate)

    def answered(self) -> set[tuple[str, int]]:
        try:
            items = json.loads(self.answer)
        except ValueError:
            return set()
        return {(str(i.get("id")), int(i.get("img_idx", 0))) for i in items if isinstance(i, dict) and "id" in i}

    def reasoning_anchors(self) -> list[re.Match[str]]:
        """The think block's tags that the answer does not use (the ones ``anchor_error`` may move)."""
        answered = self.answered()
        return [t for t in _TAG.finditer(self.think) if (t.group(3), int(t.group(4))) not in answered]

    def apply(self, faulty: int = 0) -> str:
        """The degraded text, with ``faulty`` reasoning anchors moved onto other objects."""
        answered = self.answered()
        for _ in range(faulty):
            self.move_an_anchor(answered)
        self.change_view_ids(answered)
        self.drop_anchors({i for i, _ in answered})
        self.drop_step_ids()
        if self.chance(self.rates.hallucination):
            self.hallucinate()
        if self.chance(self.rates.wrong_view):
            self.wrong_view()
        if self.oracle.next_goal() is not None and self.chance(self.rates.early_done):
            self.answer = json.dumps([{"label": "done"}])
            self.injected.append("early done")
        if self.chance(self.rates.broken_tag):
            tags = list(_TAG.finditer(self.think))
            if tags:
                tag = tags[int(self.rng.integers(len(tags)))]
                self.think = self.think[: tag.start()] + tag.group(0)[:-2] + self.think[tag.end() :]
                self.injected.append("broken tag")
        close = "</answer>"
        if self.chance(self.rates.missing_answer):
            close = ""
            self.injected.append("missing answer")
        return f"<think>{self.think}</think><answer>{self.answer}{close}"

    def _norm(self, view: int, u: float, v: float) -> tuple[int, int]:
        height, width = self.rendered[view].segmentation.shape
        x, y = pixel_index_to_normalized(min(int(u), width - 1), min(int(v), height - 1), (width, height))
        return round(x), round(y)

    def move_an_anchor(self, answered: set[tuple[str, int]]) -> None:
        tags = self.reasoning_anchors()
        if not tags:
            return
        from robopin.sim.oracle import describe  # pybullet's side of the simulator, only when a sample errs

        tag = tags[int(self.rng.integers(len(tags)))]
        view = int(tag.group(4))
        sightings = self.oracle.sightings(self.rendered)
        scene = self.oracle.scene
        own = tag.group(2)
        others = [
            s for name, seen in sightings.items() for s in seen
            if s.view == view and own not in (describe(scene, name), f"free area on the {describe(scene, name)}")
        ]  # fmt: skip
        if not others:
            return
        spot = others[int(self.rng.integers(len(others)))]
        x, y = self._norm(view, spot.u, spot.v)
        moved = tag.group(0).replace(f'point="[{tag.group(5)}, {tag.group(6)}]"', f'point="[{x}, {y}]"')
        self.think = self.think[: tag.start()] + moved + self.think[tag.end() :]
        self.injected.append(f"anchor on another object ({tag.group(3)} in image {view})")

    def _next_id(self, kind: str) -> str:
        used = [int(m.group(1)) for m in re.finditer(rf"{kind}_(\d+)", self.think + self.answer)]
        return f"{kind}_{max(used, default=0) + 1:02d}"

    def change_view_ids(self, answered: set[tuple[str, int]]) -> None:
        seen: set[str] = set()
        for tag in list(_TAG.finditer(self.think)):
            ident, view = tag.group(3), int(tag.group(4))
            if ident not in seen:
                seen.add(ident)
                continue
            if not self.chance(self.rates.view_id_change):
                continue
            new = self._next_id(tag.group(1))
            start = self.think.find(tag.group(0))
            self.think = (
                self.think[:start]
                + tag.group(0).replace(f'id="{ident}"', f'id="{new}"')
                + self.think[start + len(tag.group(0)) :]
            )
            if (ident, view) in answered:
                self.answer = self.answer.replace(
                    f'"id": "{ident}", "img_idx": {view}', f'"id": "{new}", "img_idx": {view}'
                )
            self.injected.append(f"id changed across views ({ident} -> {new} in image {view})")

    def drop_anchors(self, answered_ids: set[str]) -> None:
        for tag in list(_TAG.finditer(self.think)):
            ident = tag.group(3)
            if ident in answered_ids or not self.chance(self.rates.anchor_drop):
                continue
            name = tag.group(2)
            self.think = re.sub(re.escape(f'<{tag.group(1)} name="{name}" id="{ident}"') + r'[^>]*>', f"the {name}",
                                self.think)  # fmt: skip
            self.think = _BARE.sub(lambda m, i=ident, n=name: f"the {n}" if m.group(1) == i else m.group(1), self.think)
            answered_ids.add(ident)  # one draw per entity
            self.injected.append(f"entity not pinned ({name})")

    def drop_step_ids(self) -> None:
        names = {t.group(3): t.group(2) for t in _TAG.finditer(self.think)}
        tags = [(t.start(), t.end()) for t in _TAG.finditer(self.think)]
        pieces, position, dropped = [], 0, 0
        for match in _BARE.finditer(self.think):
            if any(a <= match.start() < b for a, b in tags) or match.group(1) not in names:
                continue
            if self.chance(self.rates.step_id_drop):
                pieces += [self.think[position : match.start()], f"the {names[match.group(1)]}"]
                position = match.end()
                dropped += 1
        if dropped:
            self.think = "".join(pieces) + self.think[position:]
            self.injected.append(f"{dropped} reference(s) by words instead of ID")

    def hallucinate(self) -> None:
        view = int(self.rng.integers(len(self.rendered)))
        segmentation = self.rendered[view].segmentation
        bodies = {o.body_id for o in self.oracle.scene.world.objects.values()}
        rows, cols = np.nonzero(~np.isin(segmentation, list(bodies)))
        if not len(rows):
            return
        k = int(self.rng.integers(len(rows)))
        x, y = self._norm(view, cols[k] + 0.5, rows[k] + 0.5)
        name = HALLUCINATED[int(self.rng.integers(len(HALLUCINATED)))]
        tag = f'<obj name="{name}" id="{self._next_id("obj")}" img_idx="{view}" point="[{x}, {y}]">'
        self.think += f" I also see {tag}, which the task does not need."
        self.injected.append(f"hallucinated {name}")

    def wrong_view(self) -> None:
        try:
            items = json.loads(self.answer)
        except ValueError:
            return
        points = [i for i in items if isinstance(i, dict) and "img_idx" in i]
        if not points or len(self.rendered) < 2:
            return
        item = points[int(self.rng.integers(len(points)))]
        item["img_idx"] = (int(item["img_idx"]) + 1 + int(self.rng.integers(len(self.rendered) - 1))) % len(
            self.rendered
        )
        self.answer = json.dumps(items)
        self.injected.append(f"answer point {item.get('label', '')!r} in the wrong image")


_KINDS = (
    ("anchor on another object", "anchor_error"), ("wrong target", "answer_error"),
    ("target not visible", "answer_error"), ("answer point", "wrong_view"),
    ("id changed across views", "view_id_change"),
    ("reference(s) by words", "step_id_drop"), ("entity not pinned", "anchor_drop"), ("broken tag", "broken_tag"),
    ("missing answer", "missing_answer"), ("hallucinated", "hallucination"), ("early done", "early_done"),
)  # fmt: skip


def error_kind(injected: str) -> str:
    """The error type one of ``backend.injected``'s names is (``answer_error``: either answer-error rate)."""
    for words, kind in _KINDS:
        if words in injected:
            return kind
    return "other"
