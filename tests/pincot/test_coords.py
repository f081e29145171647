"""PinCoT coordinates: 0–1000 ↔ pixels and the Qwen processors' smart resize (a model's point convention is
robopin.vlm.points.PointConvention, tested in tests/vlm)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robopin.pincot.coords import (
    CoordinateError,
    ImageSize,
    normalized_to_pixels,
    pixel_index_to_normalized,
    pixels_to_normalized,
    smart_resize,
)


def test_normalized_maps_onto_image_borders_and_centre():
    assert normalized_to_pixels(0, 0, (640, 480)) == (0.0, 0.0)
    assert normalized_to_pixels(1000, 1000, (640, 480)) == (640.0, 480.0)
    assert normalized_to_pixels(500, 500, ImageSize(640, 480)) == (320.0, 240.0)


def test_pixel_centres_are_at_half_integers():
    x, y = pixel_index_to_normalized(0, 0, (1000, 1000))
    assert (x, y) == (0.5, 0.5)


def test_pixels_to_normalized_clamps_unless_told_not_to():
    assert pixels_to_normalized(-3, 500, (640, 480)) == (0.0, 1000.0)
    assert pixels_to_normalized(-3, 0, (640, 480), clamp=False)[0] < 0


@given(st.floats(0, 1000), st.floats(0, 1000), st.integers(1, 5000), st.integers(1, 5000))
def test_normalized_pixel_round_trip(x, y, width, height):
    u, v = normalized_to_pixels(x, y, (width, height))
    back = pixels_to_normalized(u, v, (width, height))
    assert back == pytest.approx((x, y), abs=1e-9)


@pytest.mark.parametrize(
    ("size", "resized"),
    [((640, 480), (644, 476)), ((1280, 720), (1288, 728)), ((10, 10), (56, 56)), ((8000, 6000), (4116, 3080))],
)
def test_smart_resize_matches_the_qwen_processor(size, resized):
    assert smart_resize(size) == ImageSize(*resized)


@given(st.integers(28, 4000), st.integers(28, 4000))
def test_smart_resize_gives_multiples_of_28_within_the_pixel_budget(width, height):
    if max(width, height) / min(width, height) > 200:
        return
    out = smart_resize((width, height), max_pixels=1_003_520)
    assert out.width % 28 == 0 and out.height % 28 == 0
    assert 56 * 56 <= out.width * out.height <= 1_003_520


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: normalized_to_pixels(1, 1, (0, 480)), "positive"),
        (lambda: smart_resize((10000, 10)), "aspect ratio"),
        (lambda: smart_resize((640, 480), min_pixels=10, max_pixels=5), "min_pixels"),
    ],
)
def test_bad_inputs_raise_a_coordinate_error_naming_the_value(call, match):
    with pytest.raises(CoordinateError, match=match):
        call()
