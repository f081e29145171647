"""The operator protocol of a trial batch: what the runner asks a person, and every way a person answers.

The trial runner asks two things per trial, and blocks until they are answered: "set up this scene"
(:meth:`OperatorProtocol.ask_scene`) and "how did it go" (:meth:`OperatorProtocol.ask_judgement`).
Answers come from any front end through the same validated calls — the browser console, the
terminal (:class:`TerminalOperator`), a judge file (:class:`ScriptedOperator`) — so the first valid
answer wins and an answer for a trial that is not waiting is refused by name (:class:`OperatorError`)
without changing anything. The protocol also keeps what the console shows: the current request, the
batch's table so far and recent messages. Pure Python, no ROS.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from robopin.trials.judging import (
    FAILURE_REASONS,
    Judgement,
    JudgementError,
    StackVerdict,
    judgement_from_answer,
    reasons_table,
)

__all__ = ["JudgementRequest", "OperatorClosedError", "OperatorError", "OperatorProtocol", "SceneRequest",
           "ScriptedOperator", "TerminalOperator"]


class OperatorError(ValueError):
    """An operator action that cannot be taken now; ``code`` names why (``not_waiting``, ``wrong_trial``…)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class OperatorClosedError(RuntimeError):
    """The batch stopped (Ctrl-C, an error) while a request was waiting for the operator."""


@dataclasses.dataclass(frozen=True)
class SceneRequest:
    """Set up the scene of one trial: objects and their places in words, plus a reference picture."""

    trial_id: str
    task: str
    instruction: str
    setup: tuple[tuple[str, str], ...] = ()
    description: str = ""
    reference_image: Path | None = None
    reference_caption: str = ""

    def as_text(self) -> str:
        lines = [f"Set up trial {self.trial_id} ({self.task}): {self.instruction}"]
        if self.description:
            lines.append(f"  {self.description}")
        lines += [f"  - {thing}: {place}" for thing, place in self.setup]
        if self.reference_image is not None:
            lines.append(f"  reference picture: {self.reference_image} ({self.reference_caption})")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class JudgementRequest:
    """Judge one trial; the stack's own verdict is shown beside the question."""

    trial_id: str
    task: str
    instruction: str
    stack: StackVerdict
    subgoals_total: int | None = None

    def as_text(self) -> str:
        stack = "success" if self.stack.success else f"failure ({self.stack.failure})"
        text = f"Judge trial {self.trial_id} ({self.task}): the stack says {stack}"
        if self.stack.detail:
            text += f" — {self.stack.detail[:200]}"
        if self.subgoals_total and self.subgoals_total > 1:
            text += f"\n  long-horizon: how many of its {self.subgoals_total} sub-goals were reached?"
        return text


class OperatorProtocol:
    """One request at a time, answered by whichever front end answers first (see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._request: SceneRequest | JudgementRequest | None = None
        self._answer: Any = None
        self._closed = False
        self._listeners: list[Callable[[SceneRequest | JudgementRequest], None]] = []
        self._note_listeners: list[Callable[[str], None]] = []
        self.rows: list[dict[str, Any]] = []  # the batch's table so far, for the console
        self.messages: list[str] = []
        self.phase = "idle"  # idle | scene | running | judgement
        self.trial_id = ""
        self.version = 0  # bumped on every change (the console polls it)

    # ------------------------------------------------------------------ the runner's side
    def add_listener(self, listener: Callable[[SceneRequest | JudgementRequest], None]) -> None:
        """Call ``listener(request)`` whenever a request is posted (front ends print or answer it)."""
        self._listeners.append(listener)

    def ask_scene(self, request: SceneRequest) -> str:
        """Post a scene request and wait until someone says the scene is ready; return who did."""
        return self._ask(request, "scene")

    def ask_judgement(self, request: JudgementRequest) -> Judgement:
        """Post a judgement request and wait for a valid judgement."""
        return self._ask(request, "judgement")

    def _ask(self, request: SceneRequest | JudgementRequest, phase: str) -> Any:
        with self._cond:
            if self._closed:
                raise OperatorClosedError("the operator protocol is closed")
            self._request, self._answer = request, None
            self.phase, self.trial_id = phase, request.trial_id
            self._bump()
        try:
            for listener in list(self._listeners):
                listener(request)
        except BaseException:
            with self._cond:  # a scripted answer that was refused: the request is withdrawn, the batch stops
                self._request, self._answer, self.phase = None, None, "idle"
                self._bump()
            raise
        with self._cond:
            while self._answer is None and not self._closed:
                self._cond.wait(0.5)
            if self._answer is None:
                raise OperatorClosedError(f"the batch stopped while trial {request.trial_id} waited for the operator")
            answer, self._request, self._answer = self._answer, None, None
            self.phase = "running" if phase == "scene" else "idle"
            self._bump()
            return answer

    def trial_running(self, trial_id: str) -> None:
        with self._cond:
            self.phase, self.trial_id = "running", trial_id
            self._bump()

    def trial_done(self, row: Mapping[str, Any]) -> None:
        """Add a judged trial to the batch table."""
        with self._cond:
            self.rows = [r for r in self.rows if r.get("trial_id") != row.get("trial_id")] + [dict(row)]
            self.phase = "idle"
            self._bump()

    def note(self, message: str, *, tell: bool = False) -> None:
        """Log a message for the console; ``tell`` also passes it to every front end (the terminal prints it)."""
        with self._cond:
            self.messages = [*self.messages, f"{time.strftime('%H:%M:%S')} {message}"][-50:]
            self._bump()
        if tell:
            for listener in list(self._note_listeners):
                listener(message)

    def add_note_listener(self, listener: Callable[[str], None]) -> None:
        self._note_listeners.append(listener)

    def close(self) -> None:
        """Wake a waiting runner with :class:`OperatorClosedError`; every later answer is refused."""
        with self._cond:
            self._closed = True
            self._bump()

    @property
    def closed(self) -> bool:
        """The batch has ended (or stopped): nothing more will be asked."""
        with self._cond:
            return self._closed

    def _bump(self) -> None:
        self.version += 1
        self._cond.notify_all()

    # ------------------------------------------------------------------ the operator's side
    @property
    def request(self) -> SceneRequest | JudgementRequest | None:
        with self._cond:
            return self._request

    def _waiting(self, trial_id: str, kind: type) -> Any:
        if self._closed:
            raise OperatorError("the batch has stopped; nothing is waiting", "closed")
        request = self._request
        if request is None or self._answer is not None:
            raise OperatorError(f"nothing is waiting for an answer (trial {trial_id or '?'} is not waiting)",
                                "not_waiting")
        if request.trial_id != trial_id:
            raise OperatorError(f"trial {trial_id!r} is not waiting; trial {request.trial_id!r} is",
                                "wrong_trial")
        if not isinstance(request, kind):
            wanted = "scene ready" if kind is SceneRequest else "a judgement"
            asked = "its scene to be set up" if isinstance(request, SceneRequest) else "a judgement"
            raise OperatorError(f"trial {trial_id!r} waits for {asked}, not for {wanted}", "not_waiting")
        return request

    def scene_ready(self, trial_id: str, source: str = "") -> None:
        """The operator set the scene of ``trial_id`` up."""
        with self._cond:
            self._waiting(trial_id, SceneRequest)
            self._answer = source or "operator"
            self._bump()
        self.note(f"{trial_id}: scene ready ({source or 'operator'})")

    def judge(self, trial_id: str, answer: Any, source: str = "") -> Judgement:
        """Judge ``trial_id``; raises :class:`JudgementError` / :class:`OperatorError` and changes nothing if bad."""
        with self._cond:
            request = self._waiting(trial_id, JudgementRequest)
            judgement = judgement_from_answer(answer, request.stack, subgoals_total=request.subgoals_total,
                                              source=source, where=f"judgement of {trial_id}")
            self._answer = judgement
            self._bump()
        self.note(f"{trial_id}: {judgement.describe()} ({source or 'operator'})")
        return judgement

    def state(self) -> dict[str, Any]:
        """Everything the console shows about the batch, as JSON-ready data."""
        with self._cond:
            request = self._request
            pending: dict[str, Any] | None = None
            if isinstance(request, SceneRequest):
                pending = {"kind": "scene", "trial_id": request.trial_id, "task": request.task,
                           "instruction": request.instruction, "description": request.description,
                           "setup": [list(item) for item in request.setup],
                           "reference": request.reference_image is not None,
                           "reference_caption": request.reference_caption}
            elif isinstance(request, JudgementRequest):
                pending = {"kind": "judgement", "trial_id": request.trial_id, "task": request.task,
                           "instruction": request.instruction, "stack": request.stack.as_dict(),
                           "subgoals_total": request.subgoals_total}
            return {"version": self.version, "phase": self.phase, "trial_id": self.trial_id, "pending": pending,
                    "closed": self._closed,
                    "rows": list(self.rows), "messages": list(self.messages[-12:]),
                    "reasons": dict(FAILURE_REASONS)}


class ScriptedOperator:
    """Answers every request at once from a judge file's entries, one judgement per trial in batch order."""

    def __init__(self, protocol: OperatorProtocol, answers: Sequence[Mapping[str, Any]], *, source: str) -> None:
        self.protocol, self.answers, self.source = protocol, list(answers), source
        self.used: dict[str, int] = {}
        protocol.add_listener(self._answer)

    def assign(self, trial_ids: Sequence[str]) -> None:
        """Map the batch's trials (in order) to the file's entries; refuse a file shorter than the batch."""
        if len(self.answers) < len(trial_ids):
            raise JudgementError(f"{self.source} has {len(self.answers)} judgement(s) for {len(trial_ids)} trial(s); "
                                 "give one per trial, in the batch's order")
        self.used = {trial_id: index for index, trial_id in enumerate(trial_ids)}

    def _answer(self, request: SceneRequest | JudgementRequest) -> None:
        if isinstance(request, SceneRequest):
            self.protocol.scene_ready(request.trial_id, self.source)
            return
        index = self.used.get(request.trial_id)
        if index is None:
            raise JudgementError(f"{self.source}: no entry for trial {request.trial_id!r}")
        self.protocol.judge(request.trial_id, self.answers[index],
                            source=f"{self.source} entry {index + 1}")


class TerminalOperator:
    """The headless flow: prints each request and reads answers typed on ``stream`` (stdin by default).

    At a scene request an empty line (or ``ready``) says the scene is set up. At a judgement:
    ``success``, or a failure reason, optionally ``subgoals=N`` and a note, e.g.
    ``dropped subgoals=1 slipped on the way to the plate``.
    """

    def __init__(self, protocol: OperatorProtocol, *, stream: TextIO | None = None, out: TextIO | None = None,
                 console_url: str = "") -> None:
        self.protocol, self.stream, self.out, self.console_url = protocol, stream or sys.stdin, out or sys.stdout, \
            console_url
        protocol.add_listener(self._prompt)
        protocol.add_note_listener(lambda message: self._say(f"  {message}"))
        self._thread = threading.Thread(target=self._read, name="robopin-terminal-operator", daemon=True)
        self._thread.start()

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _prompt(self, request: SceneRequest | JudgementRequest) -> None:
        where = f" (or in the console: {self.console_url})" if self.console_url else ""
        if isinstance(request, SceneRequest):
            self._say(request.as_text() + f"\n  press Enter when the scene is ready{where}")
        else:
            self._say(request.as_text() + f"\n  type 'success' or a failure reason [subgoals=N] [note]{where}:\n"
                      + reasons_table())

    def _read(self) -> None:
        for line in self.stream:
            request = self.protocol.request
            try:
                if request is None:
                    if line.strip():
                        self._say("nothing is waiting for an answer")
                    continue
                if isinstance(request, SceneRequest):
                    if line.strip().lower() not in ("", "ready", "r", "y", "yes"):
                        self._say("press Enter (or type 'ready') when the scene is set up")
                        continue
                    self.protocol.scene_ready(request.trial_id, "terminal")
                else:
                    self.protocol.judge(request.trial_id, terminal_answer(line), "terminal")
            except (OperatorError, JudgementError) as error:
                self._say(f"not taken: {error}")


def terminal_answer(line: str) -> dict[str, Any]:
    """``success`` | ``[failure|f] REASON [subgoals=N] [note...]`` → an answer for :func:`judgement_from_answer`."""
    words = line.split()
    if not words:
        raise JudgementError("type 'success' or a failure reason", "missing_reason")
    subgoals = None
    rest = []
    for word in words:
        if word.startswith("subgoals="):
            try:
                subgoals = int(word.split("=", 1)[1])
            except ValueError:
                raise JudgementError(f"subgoals must be a whole number, got {word!r}", "bad_subgoals") from None
        else:
            rest.append(word)
    head = rest[0].lower() if rest else ""
    if head in ("s", "success", "ok"):
        answer: dict[str, Any] = {"success": True, "note": " ".join(rest[1:])}
    else:
        if head in ("f", "fail", "failure"):
            rest = rest[1:]
        if not rest:
            raise JudgementError(f"a failure needs a reason, one of {list(FAILURE_REASONS)}", "missing_reason")
        answer = {"success": False, "reason": rest[0].lower(), "note": " ".join(rest[1:])}
    if subgoals is not None:
        answer["subgoals"] = subgoals
    return answer
