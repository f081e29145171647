"""PinCoT's 0–1000 points ⇄ original-image pixels, and the Qwen processors' smart resize.

PinCoT points are ``norm1000`` (Qwen3-VL, RoboPIN): x·1000/W and y·1000/H of the original image, 0–1000 on
both axes. Qwen2.5-VL / Embodied-R1 answer in pixels of the image as fed to the model, which the
processor "smart-resizes" so both sides are multiples of 28 and the area lies within [min_pixels,
max_pixels] (:func:`smart_resize`). A backend's point convention, and the conversion of any model's
points to pixels, is :class:`robopin.vlm.points.PointConvention`.

Pixels here are continuous image coordinates of the original image: the pixel in column ``i`` spans
[i, i+1) and its centre is at ``u = i + 0.5``; 0 and W are the left and right image borders.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from robopin.pincot.trace import NORMALIZED_MAX

QWEN_PATCH_FACTOR = 28
"""Qwen2/2.5-VL resize factor: patch size 14 × spatial merge 2."""

QWEN_MIN_PIXELS = 56 * 56
"""``min_pixels`` of the released Qwen2.5-VL processor configuration (3136)."""

QWEN_MAX_PIXELS = 12_845_056
"""``max_pixels`` of the released Qwen2.5-VL processor configuration (16384 · 28 · 28)."""

_MAX_ASPECT_RATIO = 200.0


class ImageSize(NamedTuple):
    """Width and height of an image in pixels."""

    width: int
    height: int


class CoordinateError(ValueError):
    """An image size or point cannot be converted (non-positive size, non-finite value)."""


def _check_size(size: ImageSize | tuple[int, int], label: str) -> ImageSize:
    width, height = size
    if not (width > 0 and height > 0):
        raise CoordinateError(f"{label} must have positive width and height, got {tuple(size)}")
    return ImageSize(int(width), int(height))


def normalized_to_pixels(x: float, y: float, size: ImageSize | tuple[int, int]) -> tuple[float, float]:
    """0–1000 point → continuous pixels (u, v) of an image of ``size`` (u = x·W/1000)."""
    width, height = _check_size(size, "image size")
    return x * width / NORMALIZED_MAX, y * height / NORMALIZED_MAX


def pixels_to_normalized(
    u: float, v: float, size: ImageSize | tuple[int, int], *, clamp: bool = True
) -> tuple[float, float]:
    """Continuous pixels → 0–1000 (x = u·1000/W), clamped to 0–1000 unless ``clamp`` is False."""
    width, height = _check_size(size, "image size")
    x, y = u * NORMALIZED_MAX / width, v * NORMALIZED_MAX / height
    if clamp:
        x = min(max(x, 0.0), NORMALIZED_MAX)
        y = min(max(y, 0.0), NORMALIZED_MAX)
    return x, y


def pixel_index_to_normalized(column: int, row: int, size: ImageSize | tuple[int, int]) -> tuple[float, float]:
    """The centre of pixel (column, row) in 0–1000 (what a mask's pixel means as a point)."""
    return pixels_to_normalized(column + 0.5, row + 0.5, size)


def smart_resize(
    size: ImageSize | tuple[int, int],
    *,
    factor: int = QWEN_PATCH_FACTOR,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
) -> ImageSize:
    """The size Qwen2/2.5-VL processors resize an image of ``size`` to before the model sees it.

    Each side is rounded to a multiple of ``factor``; if the area then exceeds ``max_pixels`` (or falls
    below ``min_pixels``) both sides are scaled by the same factor and floored (ceiled) to multiples of
    ``factor``. 640x480 → 644x476 with the defaults.
    """
    width, height = _check_size(size, "image size")
    if factor < 1 or min_pixels < 1 or max_pixels < min_pixels:
        raise CoordinateError(
            f"need factor >= 1 and 1 <= min_pixels <= max_pixels, got {factor}, {min_pixels}, {max_pixels}"
        )
    if max(width, height) / min(width, height) > _MAX_ASPECT_RATIO:
        raise CoordinateError(f"aspect ratio of {width}x{height} exceeds {_MAX_ASPECT_RATIO:g}")
    resized_height = max(factor, round(height / factor) * factor)
    resized_width = max(factor, round(width / factor) * factor)
    if resized_height * resized_width > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        resized_height = max(factor, math.floor(height / beta / factor) * factor)
        resized_width = max(factor, math.floor(width / beta / factor) * factor)
    elif resized_height * resized_width < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        resized_height = math.ceil(height * beta / factor) * factor
        resized_width = math.ceil(width * beta / factor) * factor
    return ImageSize(resized_width, resized_height)
