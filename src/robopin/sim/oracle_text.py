"""The oracle's own R^3 subtask responses and RoboGPT-R1 plans, so every reasoning mode runs in simulation.

- :func:`subtask_response`: R^3's high-level step (the R^3 paper): short reasoning about what the images
  show now, then one ``Instruction:`` line in an allowed skill format naming the next goal's object
  and place so that they ground to exactly those (:mod:`robopin.sim.grounding`), or ``done``.
- :func:`plan_response`: RoboGPT-R1's plan (the RoboGPT-R1 paper): the four JSON sections with an
  ``executable_plan`` of the action dictionary's entries that carry out the remaining goals in order (an
  action naming look-alikes, such as two yellow cubes, appears once for each of them).

Both read only what the request gives (the allowed formats, the action dictionary) and the scene's
ground truth. A goal no allowed wording or action can name is said so, by name, and left out; the
loop then refuses the step (an instruction outside the grammar, an empty plan) before anything moves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from robopin.sim.assets import CATALOG
from robopin.sim.grounding import NATURAL_COLORS, GroundingError, action_plan, ground_instruction, split_instruction

_FORMAT_LINE = re.compile(r"^- (.*\{object\}.*\{target\}.*)$", re.MULTILINE)
_ACTION_LINE = re.compile(r"^(\d+): (.+)$", re.MULTILINE)


def allowed_formats(prompt: str) -> list[str]:
    """The skill formats an R^3 prompt lists (``- pick up the {object} and place it on the {target}``)."""
    return [m.group(1).strip() for m in _FORMAT_LINE.finditer(prompt)]


def action_dictionary(prompt: str) -> dict[int, str]:
    """The ``id: name`` lines of a RoboGPT-R1 prompt."""
    return {int(m.group(1)): m.group(2).strip() for m in _ACTION_LINE.finditer(prompt)}


def _grounds_to(scene, text: str, goal: tuple[str, str]) -> bool:
    try:
        return ground_instruction(scene, text).goals == (goal,)
    except GroundingError:
        return False


def _phrases(scene, name: str) -> list[str]:
    """Ways to name one object, plainest first (colour + catalogue word, then "outside the plates")."""
    obj = scene.world.object(name)
    color = obj.color or NATURAL_COLORS.get(obj.kind, "")
    words = CATALOG[obj.kind].words
    plain = [f"{color} {w}".strip() for w in words] + list(words)
    return plain + [f"{p} outside the plates" for p in plain if obj.graspable]


def referring_instruction(scene, goal: tuple[str, str], formats: Sequence[str], own: tuple[str, str] | None) -> str:
    """An instruction in one of ``formats`` that grounds to exactly ``goal`` in ``scene``, or "".

    ``own`` is the scenario's own (object, place) phrases, used for the goal they name: relations
    ("the duck behind two toys") are what tells two ducks apart.
    """
    objects = _phrases(scene, goal[0])
    places = _phrases(scene, goal[1])
    if own is not None:
        objects, places = [own[0], *objects], [own[1], *places]
    for pattern in formats:
        for obj in objects:
            for place in places:
                text = pattern.replace("{object}", obj).replace("{target}", place)
                if _grounds_to(scene, text, goal):
                    return text
    return ""


def subtask_response(oracle, prompt: str) -> str:
    """R^3's response for the oracle's scene now: reasoning + ``Instruction: …`` (or ``done``)."""
    scene = oracle.scene
    goal = oracle.next_goal()
    if oracle.grounding_error:
        return f"{oracle.grounding_error[0].upper()}{oracle.grounding_error[1:]}.\nInstruction: "
    if goal is None:
        return "Every object the goal names is where it should be in the current images.\nInstruction: done"
    own = _own_phrases(oracle)
    text = referring_instruction(scene, goal, allowed_formats(prompt), own if _is_own_goal(oracle, goal) else None)
    reasoning = (
        f"In the current images the {_word(scene, goal[0])} is not yet on the {_word(scene, goal[1])}; "
        "that is the next step towards the goal."
    )
    if not text:
        return f"{reasoning} No allowed instruction format names it unambiguously.\nInstruction: "
    return f"{reasoning}\nInstruction: {text}"


def plan_response(oracle, prompt: str) -> str:
    """RoboGPT-R1's JSON plan over the prompt's action dictionary for the remaining goals."""
    scene = oracle.scene
    actions = action_dictionary(prompt)
    remaining = [g for g in oracle.goals() if not _done(scene, g)]
    missing: list[str] = []
    if oracle.grounding_error:
        missing.append(oracle.grounding_error)
        remaining = []
    ids, unnamed = action_plan(scene, actions, remaining)
    steps: list[dict[str, object]] = [{"action_id": key, "action_name": actions[key]} for key in ids]
    missing += [f"no action moves the {_word(scene, o)} to the {_word(scene, t)}" for o, t in unnamed]
    if missing:
        steps = []
    names = [str(s["action_name"]) for s in steps]
    value = {
        "visual_state_description": "; ".join(
            f"the {_word(scene, o)} is not on the {_word(scene, t)}" for o, t in remaining
        )
        or "every object the instruction names is already in place",
        "reasoning_and_reflection": "; ".join(missing)
        or "each object is moved in turn; after each move the scene is observed again before the next",
        "language_plan": ", then ".join(names),
        "executable_plan": steps,
    }
    return json.dumps(value)


def _word(scene, name: str) -> str:
    return _phrases(scene, name)[0]


def _done(scene, goal: tuple[str, str]) -> bool:
    from robopin.sim.tasks import on_plate

    return on_plate(scene.world, goal[0], goal[1])[0]


def _own_phrases(oracle) -> tuple[str, str] | None:
    return split_instruction(oracle.scene.task.instruction)


def _is_own_goal(oracle, goal: tuple[str, str]) -> bool:
    goals = [(g.object, g.target) for g in oracle.scene.task.goals]
    return len(goals) == 1 and goals[0] == goal
