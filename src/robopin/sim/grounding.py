"""What an instruction asks for in a simulated scene: the objects and places it names, from ground truth.

The oracle reads the instruction it is sent as a careful model would: it finds the object to pick and
the place to put it among the scene's objects (by the words of the object catalogue and the colours),
and refuses by name an instruction it cannot ground (nothing in the scene fits, or several things do
and the instruction does not say which). The scenario's own instruction, and its own referring
phrases ("the duck in front of two toys", "the middle plate among plates"), ground to the scenario's
goals: relations between objects are read only there, from the layout that made them true.

Forms read: ``<verb> [the] <object> and place|put it <on|in|into|to> [the] <place>`` and
``<verb> [the] <object> <on|onto|in|into|to> [the] <place>``; a plural or generic head ("yellow
objects", "all the red cubes") names every graspable object that fits.

Look-alikes: when the object phrase fits several objects of one kind and colour and the task sends every
one of them to the place the instruction names, it does not matter which one is meant: the instruction
grounds to the first of them (in the task's order) not there yet, and saying it again moves the next one
(:attr:`Grounding.alike`, :func:`action_plan`). An action dictionary names kinds, not objects ("the yellow cube
outside the plates"), so a layout with two yellow cubes is carried out by that action twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from robopin.sim.assets import CATALOG, COLORS_RGBA
from robopin.sim.tasks import Scene, on_plate

NATURAL_COLORS = {"duck": "yellow"}
"""Colours of kinds drawn with their own texture (no colour set): pybullet_data's duck_vhacd is yellow."""
GENERIC_NOUNS = ("object", "thing", "item")
"""Head nouns that name no kind: with a colour they select every graspable object of that colour."""

_VERB = re.compile(r"^(?:please\s+)?(?:pick\s+up|pick|grab|take|get|put|place|move|bring|carry|collect)\s+")
_AND_PLACE = re.compile(r"\s+and\s+(?:then\s+)?(?:place|put|drop|move|set|leave)\s+(?:(?:it|them)\s+)?")
_PREPOSITION = re.compile(r"^(?:on\s+top\s+of|onto|on|into|inside|in|to|at)\s+")
_LAST_PREPOSITION = re.compile(r"\s(?:onto|on|into|inside|in|to)\s(?!.*\s(?:onto|on|into|inside|in|to)\s)")
_ARTICLE = re.compile(r"^(?:the|a|an|all\s+the|all|every|each)\s+")
_QUANTIFIER = re.compile(r"^(?:all|every|each)\b")
_OFF_PLATE = re.compile(r"\b(?:outside (?:of )?(?:the |any )?plates?|not on (?:a|any) plate)\b")


class GroundingError(ValueError):
    """The instruction names nothing the scene has, or names it ambiguously (the message says which).

    ``kind``: ``missing`` (nothing in the scene fits), ``ambiguous`` (several things fit and the
    instruction does not say which: ``candidates`` names them) or ``unreadable`` (no object and place
    could be read from the words).
    """

    def __init__(self, message: str, kind: str = "missing", candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.candidates = tuple(candidates)


@dataclass(frozen=True)
class Grounding:
    """The goals an instruction asks for: (object, target) pairs in order; ``own``: the scenario's task.

    ``alike``: the look-alike objects the object phrase fits when the task sends all of them to the named
    place, in the task's order (empty otherwise); ``goals`` then holds the first of them not there yet.
    """

    instruction: str
    goals: tuple[tuple[str, str], ...]
    own: bool = False
    alike: tuple[str, ...] = ()


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", text.lower()).split())


def split_instruction(instruction: str) -> tuple[str, str] | None:
    """(object phrase, place phrase) of a pick-and-place instruction, normalised, or None."""
    text = _normalise(instruction)
    text = _VERB.sub("", text)
    parts = _AND_PLACE.split(text, maxsplit=1)
    if len(parts) == 2:
        obj, place = parts
        place = _PREPOSITION.sub("", place)
    else:
        match = _LAST_PREPOSITION.search(text)
        if match is None:
            return None
        obj, place = text[: match.start()], text[match.end() :]
    obj, place = obj.strip(), place.strip()
    return (obj, place) if obj and place else None


def _head(phrase: str, objects: list) -> tuple[list, bool]:
    """Objects whose catalogue word is the phrase's first noun (colours before it filter), and whether
    the head is plural or quantified (then all of them are meant)."""
    quantified = bool(_QUANTIFIER.match(phrase))
    phrase = _ARTICLE.sub("", phrase)
    tokens = phrase.split()
    best: tuple[int, int] | None = None  # (token index, words in the noun)
    hits: dict[tuple[int, int], list] = {}
    for obj in objects:
        nouns = [tuple(w.split()) for w in CATALOG[obj.kind].words] + [(g,) for g in GENERIC_NOUNS]
        for index in range(len(tokens)):
            for noun in nouns:
                window = tokens[index : index + len(noun)]
                if len(window) != len(noun) or window[:-1] != list(noun[:-1]):
                    continue
                last = window[-1]
                if last not in (noun[-1], noun[-1] + "s", noun[-1] + "es"):
                    continue
                generic = noun[-1] in GENERIC_NOUNS
                key = (index, len(noun))
                hits.setdefault(key, [])
                if obj not in hits[key] and (not generic or obj.graspable):
                    hits[key].append(obj)
                if best is None or (index, -len(noun)) < (best[0], -best[1]):
                    best = key
    if best is None:
        return [], quantified
    head = tokens[best[0] + best[1] - 1]
    quantified = quantified or (head.endswith("s") and head not in {w for o in hits[best] for w in _singulars(o)})
    colors = {t for t in tokens[: best[0]] if t in COLORS_RGBA}
    chosen = [o for o in hits[best] if not colors or (o.color or NATURAL_COLORS.get(o.kind)) in colors]
    return chosen, quantified


def _singulars(obj) -> set[str]:
    return {w.split()[-1] for w in CATALOG[obj.kind].words} | set(GENERIC_NOUNS)


def _describe_all(objects: list) -> str:
    words = sorted({f"{o.color + ' ' if o.color else ''}{CATALOG[o.kind].words[0]}" for o in objects})
    return ", ".join(words) if words else "nothing"


def _ambiguous(phrase: str, found: list, what: str) -> GroundingError:
    """Several things fit ``phrase``: name each (with how it looks, where that tells them apart)."""
    names = tuple(o.name for o in found)
    looks = [_describe_all([o]) for o in found]
    alike = len(set(looks)) == 1
    listed = ", ".join(n if alike else f"{n}: {w}" for n, w in zip(names, looks, strict=True))
    return GroundingError(f"{phrase!r} fits {len(found)} {what} ({listed}): say which one", "ambiguous", names)


def ground_instruction(scene: Scene, instruction: str) -> Grounding:
    """The goals ``instruction`` asks for in ``scene`` (ground truth), or :class:`GroundingError`."""
    task = scene.task
    goals = tuple((g.object, g.target) for g in task.goals)
    if _normalise(instruction) == _normalise(task.instruction):
        return Grounding(instruction, goals, own=True)
    parts = split_instruction(instruction)
    if parts is None:
        raise GroundingError(
            f"cannot tell what to pick and where to put it in {instruction!r}: the simulator's oracle reads "
            "'pick up the <object> and place it on the <place>' or 'put the <object> in the <place>'",
            "unreadable",
        )
    obj_phrase, place_phrase = parts
    own = split_instruction(task.instruction)
    objects = list(scene.world.objects.values())
    graspable = [o for o in objects if o.graspable]
    supports = [o for o in objects if not o.graspable]
    ambiguous: list = []
    if own is not None and _ARTICLE.sub("", obj_phrase) == _ARTICLE.sub("", own[0]):
        picks = list(dict.fromkeys(g[0] for g in goals))
    else:
        found, every = _head(obj_phrase, graspable)
        if found and _OFF_PLATE.search(obj_phrase):
            plates = [o.name for o in supports]
            found = [o for o in found if not any(on_plate(scene.world, o.name, plate)[0] for plate in plates)]
        if not found:
            raise GroundingError(
                f"the instruction asks to pick {obj_phrase!r}, but no object in the scene is that "
                f"(the scene has: {_describe_all(graspable)})"
            )
        if len(found) > 1 and not every:
            ambiguous = found
        picks = [o.name for o in found]
    if ambiguous:
        # Which one is meant does not matter only for look-alikes all bound for the one place named.
        try:
            targets = _places(scene, place_phrase, own, goals, supports)
        except GroundingError:
            targets = []
        alike = _alike_goals(scene, ambiguous, targets[0]) if len(targets) == 1 else ()
        if not alike:
            raise _ambiguous(obj_phrase, ambiguous, "objects")
        waiting = [name for name in alike if not on_plate(scene.world, name, targets[0])[0]]
        return Grounding(instruction, (((waiting or alike)[0], targets[0]),), own=False, alike=alike)
    targets = _places(scene, place_phrase, own, goals, supports)
    if len(targets) != 1:
        by_name = {o.name: o for o in supports}
        raise _ambiguous(place_phrase, [by_name[t] for t in targets if t in by_name], "places")
    return Grounding(instruction, tuple((pick, targets[0]) for pick in picks), own=False)


def _places(scene: Scene, place_phrase: str, own, goals, supports: list) -> list[str]:
    """The places ``place_phrase`` fits (the scenario's own place phrase: its goals' targets)."""
    if own is not None and _ARTICLE.sub("", place_phrase) == _ARTICLE.sub("", own[1]):
        return list(dict.fromkeys(g[1] for g in goals))
    found, _every = _head(place_phrase, supports)
    if not found:
        raise GroundingError(
            f"the instruction asks to place on {place_phrase!r}, but nothing in the scene is that "
            f"(the places are: {_describe_all(supports)})"
        )
    return [o.name for o in found]


def _look(obj) -> tuple[str, str | None]:
    return obj.kind, obj.color or NATURAL_COLORS.get(obj.kind)


def _alike_goals(scene: Scene, found: list, target: str) -> tuple[str, ...]:
    """``found``'s names in the task's order when they look alike and the task sends each to ``target``,
    else () (then which one is meant matters: the instruction is ambiguous)."""
    if len({_look(o) for o in found}) != 1:
        return ()
    order = [g.object for g in scene.task.goals if g.target == target]
    names = {o.name for o in found}
    if not names <= set(order):
        return ()
    return tuple(name for name in order if name in names)


def action_plan(
    scene: Scene, actions: Mapping[int, str], goals: Sequence[tuple[str, str]]
) -> tuple[list[int], list[tuple[str, str]]]:
    """For each of ``goals`` in order, the first action ID of ``actions`` (ID -> instruction) that carries it
    out once the goals before it are met; and the goals no action carries out.

    An action carries out a goal when it grounds to exactly that goal, or when it names look-alikes
    (:attr:`Grounding.alike`) and the goal's object is the first of them still waiting: then the same
    action serves each look-alike in turn, and the plan repeats it.
    """
    groundings: dict[int, Grounding | None] = {}
    for key, text in sorted(actions.items()):
        try:
            groundings[key] = ground_instruction(scene, text)
        except GroundingError:
            groundings[key] = None
    steps: list[int] = []
    missing: list[tuple[str, str]] = []
    met: set[tuple[str, str]] = set()
    for obj, target in goals:
        goal = (obj, target)
        match = next((key for key, grounding in groundings.items()
                      if grounding is not None and _next_move(scene, grounding, met) == goal), None)
        if match is None:
            missing.append(goal)
            continue
        steps.append(match)
        met.add(goal)
    return steps, missing


def _next_move(scene: Scene, grounding: Grounding, met: set[tuple[str, str]]) -> tuple[str, str] | None:
    """The one goal ``grounding``'s instruction carries out once ``met`` hold (None: not exactly one)."""
    if not grounding.alike:
        return grounding.goals[0] if len(grounding.goals) == 1 else None
    target = grounding.goals[0][1]
    waiting = [(name, target) for name in grounding.alike
               if (name, target) not in met and not on_plate(scene.world, name, target)[0]]
    return waiting[0] if waiting else None
