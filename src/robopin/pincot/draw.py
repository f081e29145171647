"""Draw a PinCoT trace onto its view images (for trial reports, RViz/Foxglove images, E-TTS verifiers).

Each anchor ID gets one colour shared across all views; objects are filled discs, free regions
hollow squares; each mark carries its ID as a label; answer points are emphasised with a ring and a
cross-hair. Pure numpy (a built-in 3x5 pixel font), so it runs wherever the core runs. Images are
H×W×3 uint8 RGB (H×W grayscale is promoted); the inputs are never modified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from robopin.pincot.coords import normalized_to_pixels
from robopin.pincot.trace import Anchor, AnswerPoint, Trace

Color = tuple[int, int, int]

PALETTE: tuple[Color, ...] = (
    (230, 25, 75),
    (60, 180, 75),
    (0, 130, 200),
    (255, 225, 25),
    (245, 130, 48),
    (145, 30, 180),
    (70, 240, 240),
    (240, 50, 230),
    (210, 245, 60),
    (250, 190, 212),
    (0, 128, 128),
    (170, 110, 40),
)
"""Distinct colours assigned to IDs in first-mention order (cycled beyond twelve IDs)."""

ANSWER_COLOR: Color = (255, 255, 255)
OUTLINE_COLOR: Color = (0, 0, 0)

_GLYPHS = {
    "0": "XXX X.X X.X X.X XXX", "1": ".X. XX. .X. .X. XXX", "2": "XXX ..X XXX X.. XXX",
    "3": "XXX ..X XXX ..X XXX", "4": "X.X X.X XXX ..X ..X", "5": "XXX X.. XXX ..X XXX",
    "6": "XXX X.. XXX X.X XXX", "7": "XXX ..X ..X ..X ..X", "8": "XXX X.X XXX X.X XXX",
    "9": "XXX X.X XXX ..X XXX", "A": ".X. X.X XXX X.X X.X", "B": "XX. X.X XX. X.X XX.",
    "C": "XXX X.. X.. X.. XXX", "D": "XX. X.X X.X X.X XX.", "E": "XXX X.. XX. X.. XXX",
    "F": "XXX X.. XX. X.. X..", "G": "XXX X.. X.X X.X XXX", "H": "X.X X.X XXX X.X X.X",
    "I": "XXX .X. .X. .X. XXX", "J": "..X ..X ..X X.X XXX", "K": "X.X X.X XX. X.X X.X",
    "L": "X.. X.. X.. X.. XXX", "M": "X.X XXX XXX X.X X.X", "N": "XX. X.X X.X X.X X.X",
    "O": "XXX X.X X.X X.X XXX", "P": "XXX X.X XXX X.. X..", "Q": "XXX X.X X.X XXX ..X",
    "R": "XX. X.X XX. X.X X.X", "S": "XXX X.. XXX ..X XXX", "T": "XXX .X. .X. .X. .X.",
    "U": "X.X X.X X.X X.X XXX", "V": "X.X X.X X.X X.X .X.", "W": "X.X X.X XXX XXX X.X",
    "X": "X.X X.X .X. X.X X.X", "Y": "X.X X.X .X. .X. .X.", "Z": "XXX ..X .X. X.. XXX",
    "_": "... ... ... ... XXX", "-": "... ... XXX ... ...", ".": "... ... ... ... .X.",
    ":": "... .X. ... .X. ...", " ": "... ... ... ... ...", "?": "XXX ..X .X. ... .X.",
}  # fmt: skip
_FONT = {
    char: np.array([[c == "X" for c in row] for row in rows.split()], dtype=bool) for char, rows in _GLYPHS.items()
}


def id_colors(ids: Sequence[str], palette: Sequence[Color] = PALETTE) -> dict[str, Color]:
    """One colour per ID, in the order given (pass the IDs of several traces to share colours)."""
    return {anchor_id: palette[index % len(palette)] for index, anchor_id in enumerate(dict.fromkeys(ids))}


def _as_rgb(image: np.ndarray) -> np.ndarray:
    array = np.asarray(image)
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    if array.ndim != 3 or array.shape[2] not in (3, 4):
        raise ValueError(f"image must be HxW or HxWx3 (or x4), got shape {array.shape}")
    if array.dtype != np.uint8:
        raise ValueError(f"image must be uint8, got {array.dtype}")
    return np.ascontiguousarray(array[:, :, :3]).copy()


def _paint(image: np.ndarray, top: int, left: int, mask: np.ndarray, color: Color) -> None:
    """Set ``image[top:, left:]`` to ``color`` where ``mask`` is true, clipped to the image."""
    height, width = image.shape[:2]
    y0, x0 = max(top, 0), max(left, 0)
    y1, x1 = min(top + mask.shape[0], height), min(left + mask.shape[1], width)
    if y0 >= y1 or x0 >= x1:
        return
    window = mask[y0 - top : y1 - top, x0 - left : x1 - left]
    image[y0:y1, x0:x1][window] = color


def _disc(radius: float, inner: float = -1.0) -> np.ndarray:
    size = int(np.ceil(radius))
    yy, xx = np.mgrid[-size : size + 1, -size : size + 1]
    distance = xx * xx + yy * yy
    return (distance <= radius * radius) & (distance > inner * inner if inner >= 0 else True)


def _square(half: int, thickness: int) -> np.ndarray:
    mask = np.zeros((2 * half + 1, 2 * half + 1), dtype=bool)
    mask[:thickness, :] = mask[-thickness:, :] = True
    mask[:, :thickness] = mask[:, -thickness:] = True
    return mask


def _text_mask(text: str, scale: int) -> np.ndarray:
    glyphs = [_FONT.get(c, _FONT["?"]) for c in text.upper()]
    if not glyphs:
        return np.zeros((5 * scale, 0), dtype=bool)
    spaced = []
    for glyph in glyphs:
        spaced.extend([glyph, np.zeros((5, 1), dtype=bool)])
    mask = np.hstack(spaced[:-1])
    return np.kron(mask, np.ones((scale, scale), dtype=bool)).astype(bool)


def draw_label(image: np.ndarray, text: str, x: int, y: int, color: Color, *, scale: int = 1) -> None:
    """Write ``text`` with its top-left corner at pixel (x, y) on a dark box, in place."""
    mask = _text_mask(text, scale)
    box = np.ones((mask.shape[0] + 2 * scale, mask.shape[1] + 2 * scale), dtype=bool)
    _paint(image, y - scale, x - scale, box, OUTLINE_COLOR)
    _paint(image, y, x, mask, color)


def _sizes(image: np.ndarray) -> tuple[int, int, int]:
    height, width = image.shape[:2]
    radius = max(3, round(min(height, width) / 80))
    scale = max(1, round(min(height, width) / 240))
    return width, height, radius, scale  # type: ignore[return-value]


def _pixel(x: float, y: float, width: int, height: int) -> tuple[int, int]:
    u, v = normalized_to_pixels(x, y, (width, height))
    return min(int(u), width - 1), min(int(v), height - 1)


def draw_anchor(image: np.ndarray, anchor: Anchor, color: Color, *, label: bool = True) -> None:
    """Mark one anchor in place: a disc for obj, a hollow square for space, plus its ID."""
    width, height, radius, scale = _sizes(image)
    column, row = _pixel(anchor.x, anchor.y, width, height)
    if anchor.kind == "obj":
        outline = _disc(radius + 1)
        _paint(image, row - outline.shape[0] // 2, column - outline.shape[1] // 2, outline, OUTLINE_COLOR)
        disc = _disc(radius)
        _paint(image, row - disc.shape[0] // 2, column - disc.shape[1] // 2, disc, color)
    else:
        half = radius + 1
        thickness = max(2, radius // 2)
        _paint(image, row - half - 1, column - half - 1, _square(half + 1, thickness + 2), OUTLINE_COLOR)
        _paint(image, row - half, column - half, _square(half, thickness), color)
    if label:
        draw_label(image, anchor.id, column + radius + 2 * scale, row - radius - 6 * scale, color, scale=scale)


def draw_answer_point(image: np.ndarray, point: AnswerPoint, color: Color, text: str | None = None) -> None:
    """Emphasise an answer point in place: a double ring, a cross-hair and an optional label."""
    width, height, radius, scale = _sizes(image)
    column, row = _pixel(point.x, point.y, width, height)
    outer = 2.5 * radius
    ring = _disc(outer + 1, outer - 2 - scale)
    _paint(image, row - ring.shape[0] // 2, column - ring.shape[1] // 2, ring, OUTLINE_COLOR)
    ring = _disc(outer, outer - 1 - scale)
    _paint(image, row - ring.shape[0] // 2, column - ring.shape[1] // 2, ring, color)
    arm = int(outer + radius)
    cross = np.zeros((2 * arm + 1, 2 * arm + 1), dtype=bool)
    cross[arm, :] = cross[:, arm] = True
    cross[arm - radius : arm + radius + 1, arm - radius : arm + radius + 1] = False  # keep the anchor visible
    _paint(image, row - arm, column - arm, cross, color)
    if text:
        draw_label(image, text, column + arm + scale, row + scale, color, scale=scale)


Box = tuple[int, int, int, int]
"""A pixel rectangle: (left, top, right, bottom), right and bottom exclusive."""

_STOPWORDS = frozenset({"a", "an", "the", "on", "of", "in", "into", "to", "at", "for", "with", "and"})


def short_label(text: str, max_chars: int = 14) -> str:
    """``text`` cut at a word boundary to at most ``max_chars`` (dangling small words dropped, ``..`` marks a cut)."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    words: list[str] = []
    for word in text.split():
        if len(" ".join([*words, word])) > max_chars - 2:
            break
        words.append(word)
    while words and words[-1].lower() in _STOPWORDS:
        words.pop()
    return (" ".join(words) if words else text[: max_chars - 2]) + ".."


def label_box(text: str, x: int, y: int, scale: int) -> Box:
    """Where :func:`draw_label` paints ``text`` at (x, y), its dark box included."""
    width = max(0, 4 * len(text) - 1) * scale
    return x - scale, y - scale, x + width + scale, y + 6 * scale


def _overlap(a: Box, b: Box) -> int:
    return max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))


def place_labels(
    labels: Sequence[tuple[str, int, int, int]], marks: Sequence[Box], size: tuple[int, int], scale: int
) -> list[tuple[int, int]]:
    """Top-left corners for ``labels`` (text, column, row, clearance from the mark), placed in order.

    Each label goes to the first spot around its mark that lies inside the image and covers neither a
    label placed before it nor another mark; where none does, to the spot that covers least.
    """
    width, height = size
    placed: list[Box] = []
    corners: list[tuple[int, int]] = []
    for text, column, row, clearance in labels:
        left, top, right, bottom = label_box(text, 0, 0, scale)
        w, h = right - left, bottom - top
        own = [m for m in marks if m[0] <= column < m[2] and m[1] <= row < m[3]]
        best: tuple[float, int, int] | None = None
        for reach in (clearance, 2 * clearance, 3 * clearance + h):
            for bx, by in (
                (column + reach, row - reach - h),  # right, above (the usual spot)
                (column + reach, row + reach),
                (column - reach - w, row - reach - h),
                (column - reach - w, row + reach),
                (column + reach, row - h // 2),
                (column - reach - w, row - h // 2),
                (column - w // 2, row - reach - h),
                (column - w // 2, row + reach),
            ):
                box = (bx, by, bx + w, by + h)
                inside = _overlap(box, (0, 0, width, height))
                score = 100.0 * (w * h - inside) + 10.0 * sum(_overlap(box, other) for other in placed)
                score += sum(_overlap(box, mark) for mark in marks if mark not in own)
                if best is None or score < best[0]:
                    best = (score, bx, by)
                if score == 0:
                    break
            if best is not None and best[0] == 0:
                break
        assert best is not None
        placed.append((best[1], best[2], best[1] + w, best[2] + h))
        corners.append((best[1] - left, best[2] - top))
    return corners


def draw_trace(
    images: Sequence[np.ndarray],
    trace: Trace,
    *,
    colors: Mapping[str, Color] | None = None,
    labels: bool = True,
    answer: bool = True,
) -> list[np.ndarray]:
    """Copies of ``images`` (one per view, index = img_idx) with the trace drawn on them.

    Anchors whose ``img_idx`` has no image are skipped, as are answer points that name no view.
    ``colors`` maps IDs to colours (default :func:`id_colors` of the trace's IDs). Labels are laid out
    after every mark is drawn (:func:`place_labels`): the answer's first, none over another label or
    over another mark where the image has room. An answer point on its own anchor carries one label,
    its ID and its (shortened) name.
    """
    return _draw(images, trace, colors, labels, answer)[0]


def label_boxes(images: Sequence[np.ndarray], trace: Trace) -> list[list[tuple[str, Box]]]:
    """Per view, every label :func:`draw_trace` writes and its box (to check a layout without reading pixels)."""
    return _draw(images, trace, None, True, True)[1]


def _draw(
    images: Sequence[np.ndarray], trace: Trace, colors: Mapping[str, Color] | None, labels: bool, answer: bool
) -> tuple[list[np.ndarray], list[list[tuple[str, Box]]]]:
    canvases = [_as_rgb(image) for image in images]
    boxes: list[list[tuple[str, Box]]] = [[] for _ in canvases]
    palette = dict(colors) if colors is not None else id_colors(trace.ids)
    for anchor_id in trace.ids:
        palette.setdefault(anchor_id, PALETTE[len(palette) % len(PALETTE)])
    pending: list[list[tuple[int, str, Color, int, int, int]]] = [[] for _ in canvases]  # priority, text, ...
    marks: list[list[Box]] = [[] for _ in canvases]
    answered: dict[tuple[str, int], tuple[int, int, float]] = {}
    if answer:
        for number, point in enumerate(trace.answer_points, start=1):
            if point.img_idx is None or not 0 <= point.img_idx < len(canvases):
                continue
            canvas = canvases[point.img_idx]
            width, height, radius, scale = _sizes(canvas)
            column, row = _pixel(point.x, point.y, width, height)
            outer = int(2.5 * radius) + 2
            answered[(point.id or "", point.img_idx)] = (column, row, outer)
            marks[point.img_idx].append((column - outer, row - outer, column + outer + 1, row + outer + 1))
            name = short_label(point.label or "") or f"A{number}"
            text = f"{point.id} {name}" if point.id else name
            pending[point.img_idx].append((0, text, palette.get(point.id or "", ANSWER_COLOR), column, row, outer))
    for anchor in trace.anchors:
        if not 0 <= anchor.img_idx < len(canvases) or anchor.in_answer:
            continue
        canvas = canvases[anchor.img_idx]
        draw_anchor(canvas, anchor, palette[anchor.id], label=False)
        width, height, radius, scale = _sizes(canvas)
        column, row = _pixel(anchor.x, anchor.y, width, height)
        marks[anchor.img_idx].append((column - radius - 1, row - radius - 1, column + radius + 2, row + radius + 2))
        at = answered.get((anchor.id, anchor.img_idx))
        if at is not None and (column - at[0]) ** 2 + (row - at[1]) ** 2 <= at[2] ** 2:
            continue  # the answer's label names this anchor
        pending[anchor.img_idx].append((1, anchor.id, palette[anchor.id], column, row, radius + 2))
    if answer:
        for point in trace.answer_points:
            if point.img_idx is not None and 0 <= point.img_idx < len(canvases):
                draw_answer_point(canvases[point.img_idx], point, palette.get(point.id or "", ANSWER_COLOR))
    if labels:
        for canvas, queued, seen, drawn in zip(canvases, pending, marks, boxes, strict=True):
            width, height, _radius, scale = _sizes(canvas)
            todo = sorted(queued, key=lambda item: item[0])
            corners = place_labels([(t[1], t[3], t[4], t[5]) for t in todo], seen, (width, height), scale)
            for (_priority, text, color, *_), (x, y) in zip(todo, corners, strict=True):
                draw_label(canvas, text, x, y, color, scale=scale)
                drawn.append((text, label_box(text, x, y, scale)))
    return canvases, boxes

