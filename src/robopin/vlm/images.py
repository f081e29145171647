"""Encoding camera views for a model request: RGB arrays to JPEG/PNG bytes and base64 data URLs.

JPEG is the default because a 640x480 view is ~30-60 kB instead of ~500 kB as PNG, which keeps a
multi-view request small on the wire to a remote vLLM server; PNG is there for lossless checks.
"""

from __future__ import annotations

import base64
import io
from typing import Literal

import numpy as np
from PIL import Image

from robopin.vlm.errors import VLMRequestError

ImageFormat = Literal["jpeg", "png"]
IMAGE_FORMATS: tuple[str, ...] = ("jpeg", "png")
MIME_TYPES = {"jpeg": "image/jpeg", "png": "image/png"}
CHROMA_SUBSAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}


def check_image_format(image_format: str, jpeg_quality: int, chroma_subsampling: str = "4:2:0") -> None:
    """Raise ValueError naming the value when the format, JPEG quality or subsampling is not usable."""
    if chroma_subsampling not in CHROMA_SUBSAMPLING:
        raise ValueError(f"chroma_subsampling must be one of {sorted(CHROMA_SUBSAMPLING)}, got {chroma_subsampling!r}")
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    if not isinstance(jpeg_quality, int) or not 1 <= jpeg_quality <= 100:
        raise ValueError(f"jpeg_quality must be an integer in 1..100, got {jpeg_quality!r}")


def to_pil(rgb: np.ndarray) -> Image.Image:
    """Wrap an (H, W, 3) uint8 RGB array as a PIL image (copying only if it is not contiguous)."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise VLMRequestError(f"expected an (H, W, 3) uint8 RGB image, got shape {rgb.shape} {rgb.dtype}")
    return Image.fromarray(np.ascontiguousarray(rgb), mode="RGB")


def encode_image(
    rgb: np.ndarray,
    image_format: ImageFormat = "jpeg",
    jpeg_quality: int = 90,
    chroma_subsampling: str = "4:2:0",
) -> bytes:
    """Encode an RGB image as JPEG or PNG bytes."""
    check_image_format(image_format, jpeg_quality, chroma_subsampling)
    buffer = io.BytesIO()
    image = to_pil(rgb)
    if image_format == "jpeg":
        # 4:2:0 is what the model saw in training (web JPEGs) and encodes several times faster;
        # 4:4:4 keeps thin coloured edges (a red cable, a marker) sharp when that matters.
        image.save(buffer, format="JPEG", quality=jpeg_quality, subsampling=CHROMA_SUBSAMPLING[chroma_subsampling])
    else:
        # Level 1 is ~5x faster than the default and only slightly larger.
        image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def image_data_url(
    rgb: np.ndarray,
    image_format: ImageFormat = "jpeg",
    jpeg_quality: int = 90,
    chroma_subsampling: str = "4:2:0",
) -> str:
    """Return ``data:image/…;base64,…`` for an RGB image, the form OpenAI-style servers accept."""
    encoded = encode_image(rgb, image_format, jpeg_quality, chroma_subsampling)
    payload = base64.b64encode(encoded).decode("ascii")
    return f"data:{MIME_TYPES[image_format]};base64,{payload}"


def decode_data_url(url: str) -> np.ndarray:
    """Decode a ``data:image/…;base64,…`` URL back to an (H, W, 3) uint8 RGB array."""
    header, separator, payload = url.partition(",")
    if not separator or not header.startswith("data:image/") or not header.endswith(";base64"):
        raise ValueError(f"not a base64 image data URL: {url[:40]!r}…")
    with Image.open(io.BytesIO(base64.b64decode(payload, validate=True))) as image:
        return np.asarray(image.convert("RGB"))
