"""Point conventions of VLMs and their conversion to pixels of the original camera image.

A model writes points in its own convention: Qwen3-VL / RoboPIN write ``norm1000`` (x·1000/W,
y·1000/H, 0–1000), Qwen2.5-VL / Embodied-R1 write ``pixels_resized`` (pixels of the image after the
processor's smart resize to multiples of the patch factor), and a model that answers in pixels of
the image exactly as the camera gave it writes ``pixels`` (no resize). The core works in continuous pixels of
the original image (pixel i spans [i, i+1), its centre is i + 0.5), so every backend converts here,
at its boundary, and nothing downstream needs to know which model ran.

The arithmetic (smart resize) is the PinCoT layer's (:mod:`robopin.pincot.coords`); this module
binds it to a backend's declared convention and processor settings, and works on arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from robopin.pincot.coords import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, QWEN_PATCH_FACTOR, ImageSize, smart_resize
from robopin.vlm.errors import VLMConfigError

PointConventionName = Literal["norm1000", "pixels_resized", "pixels"]
POINT_CONVENTIONS: tuple[str, ...] = ("norm1000", "pixels_resized", "pixels")

NORM_SCALE = 1000.0
"""Full scale of the ``norm1000`` convention."""

# Qwen2.5-VL processor defaults: 14 px patches merged 2x2 -> 28; 4..16384 merged tokens.
QWEN25_RESIZE_FACTOR = QWEN_PATCH_FACTOR
QWEN25_MIN_PIXELS = QWEN_MIN_PIXELS
QWEN25_MAX_PIXELS = QWEN_MAX_PIXELS
# Qwen3-VL: 16 px patches merged 2x2 -> 32.
QWEN3_RESIZE_FACTOR = 32


@dataclass(frozen=True)
class PointConvention:
    """How one model writes image points, with what it needs to map them to original pixels.

    ``resize_factor``, ``min_pixels`` and ``max_pixels`` matter only for ``pixels_resized`` and must
    match the processor the model is served with (vLLM or transformers), or points land scaled.
    """

    name: PointConventionName = "norm1000"
    resize_factor: int = QWEN25_RESIZE_FACTOR
    min_pixels: int = QWEN25_MIN_PIXELS
    max_pixels: int = QWEN25_MAX_PIXELS

    def __post_init__(self) -> None:
        if self.name not in POINT_CONVENTIONS:
            raise VLMConfigError(f"point convention must be one of {POINT_CONVENTIONS}, got {self.name!r}")
        if self.resize_factor <= 0:
            raise VLMConfigError(f"resize_factor must be positive, got {self.resize_factor}")
        if not 0 < self.min_pixels <= self.max_pixels:
            raise VLMConfigError(
                f"need 0 < min_pixels <= max_pixels, got min_pixels={self.min_pixels}, max_pixels={self.max_pixels}"
            )

    def model_frame_size(self, width: int, height: int) -> tuple[float, float]:
        """Return the (width, height) of the frame the model's coordinates live in for this image."""
        if self.name == "norm1000":
            return NORM_SCALE, NORM_SCALE
        if self.name == "pixels":
            return float(width), float(height)
        resized = smart_resize(
            ImageSize(width, height),
            factor=self.resize_factor,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )
        return float(resized.width), float(resized.height)

    def to_pixels(self, points: np.ndarray | list, width: int, height: int) -> np.ndarray:
        """Map model points, shape (..., 2) as [x, y], to pixels [u, v] of the width x height image.

        Points outside the model's frame are clamped to the image, as the model's own frame is.
        """
        model_points = np.asarray(points, dtype=np.float64)
        if model_points.shape[-1:] != (2,):
            raise ValueError(f"points must have shape (..., 2), got {model_points.shape}")
        frame_w, frame_h = self.model_frame_size(width, height)
        scale = np.array([width / frame_w, height / frame_h])
        pixels = model_points * scale
        return np.clip(pixels, 0.0, [float(width), float(height)])

    def from_pixels(self, pixels: np.ndarray | list, width: int, height: int) -> np.ndarray:
        """Map pixels [u, v] of the width x height image to this model's [x, y] (not rounded)."""
        pixel_points = np.asarray(pixels, dtype=np.float64)
        if pixel_points.shape[-1:] != (2,):
            raise ValueError(f"pixels must have shape (..., 2), got {pixel_points.shape}")
        frame_w, frame_h = self.model_frame_size(width, height)
        model_points = pixel_points * np.array([frame_w / width, frame_h / height])
        return np.clip(model_points, 0.0, [frame_w, frame_h])
