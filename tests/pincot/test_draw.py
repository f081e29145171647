"""Drawing traces on view images: per-ID colours across views, obj/space marks, labels, answer points."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.pincot import draw_trace, id_colors, parse
from robopin.pincot.draw import ANSWER_COLOR, PALETTE

TEXT = (
    '<think><obj name="duck" id="obj_01" img_idx="0" point="[250, 250]"> goes to '
    '<space name="plate" id="space_01" img_idx="0" point="[750, 750]">; from the wrist '
    '<obj name="duck" id="obj_01" img_idx="1" point="[500, 500]">.</think>'
    '<answer>[{"point_2d": [250, 250], "label": "pick", "id": "obj_01", "img_idx": 0},'
    ' {"point_2d": [100, 900], "img_idx": 1}]</answer>'
)


@pytest.fixture
def drawn():
    trace = parse(TEXT, 2)
    assert trace.valid, trace.errors
    images = [np.zeros((480, 640, 3), np.uint8), np.full((240, 320), 50, np.uint8)]
    return trace, images, draw_trace(images, trace)


def colour_at(image, x_norm, y_norm):
    height, width = image.shape[:2]
    return tuple(int(c) for c in image[int(y_norm * height / 1000), int(x_norm * width / 1000)])


def test_one_colour_per_id_across_views(drawn):
    _trace, _images, (static, wrist) = drawn
    duck = PALETTE[0]
    assert colour_at(static, 250, 250) == duck
    assert colour_at(wrist, 500, 500) == duck


def test_space_is_a_hollow_square_and_obj_a_filled_disc(drawn):
    _trace, _images, (static, _wrist) = drawn
    plate = PALETTE[1]
    row, column = int(0.75 * 480), int(0.75 * 640)
    assert tuple(static[row, column]) == (0, 0, 0)  # hollow centre
    square = static[row - 12 : row + 13, column - 12 : column + 13]
    assert (square == plate).all(axis=2).sum() > 20
    radius = max(3, round(480 / 80))
    duck_row, duck_col = int(0.25 * 480), int(0.25 * 640)
    disc = static[duck_row - radius + 1 : duck_row + radius, duck_col - 1 : duck_col + 2]
    assert (disc == PALETTE[0]).all()


def test_ids_are_labelled_and_answer_points_emphasised(drawn):
    _trace, _images, (static, wrist) = drawn
    label_region = static[100:125, 160:260]
    assert (label_region == PALETTE[0]).all(axis=2).any()
    # A free answer point (no ID) is ringed in the answer colour on its view.
    row, column = int(0.9 * 240), int(0.1 * 320)
    ring = wrist[row - 20 : row + 21, column - 20 : column + 21]
    assert (ring == ANSWER_COLOR).all(axis=2).sum() > 20
    assert not (static == ANSWER_COLOR).all(axis=2).any()


def test_inputs_are_untouched_and_grayscale_is_promoted(drawn):
    _trace, images, (static, wrist) = drawn
    assert not images[0].any()
    assert (images[1] == 50).all()
    assert wrist.shape == (240, 320, 3)
    assert static.dtype == np.uint8


def test_anchors_for_missing_views_and_points_at_the_border_are_safe():
    trace = parse(
        '<think><obj name="a" id="obj_01" img_idx="1" point="[1000, 1000]"></think><answer>obj_01</answer>', 2
    )
    (only,) = draw_trace([np.zeros((60, 80, 3), np.uint8)], trace)
    assert not only.any()
    two = draw_trace([np.zeros((60, 80, 3), np.uint8)] * 2, trace)
    assert two[1].any()


def test_shared_colours_for_several_traces():
    colours = id_colors(["obj_01", "space_01", "obj_01", "obj_02"])
    assert list(colours) == ["obj_01", "space_01", "obj_02"]
    assert len(set(colours.values())) == 3


@pytest.mark.parametrize("image", [np.zeros((4, 4, 2), np.uint8), np.zeros((4, 4, 3), np.float32)])
def test_bad_images_are_rejected(image):
    trace = parse(TEXT, 2)
    with pytest.raises(ValueError, match="image"):
        draw_trace([image, image], trace)


def _overlaps(boxes):
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:]
            if min(ba[2], bb[2]) > max(ba[0], bb[0]) and min(ba[3], bb[3]) > max(ba[1], bb[1])]


def test_labels_at_640x480_stay_apart_and_inside_on_the_default_scene():
    # The shipped sim cameras' 640x480 views of the default scene (sim_panda: spatial, seed 0) with the
    # oracle's trace: seven objects, two ducks beside a teddy, a place spot on a plate.
    from robopin.pincot.draw import label_boxes
    from robopin.sim.oracle import GroundTruthOracle
    from robopin.sim.tasks import build_scene

    with build_scene("spatial", 0, robot="panda", register=False, world_name="draw-default-scene") as scene:
        oracle = GroundTruthOracle(scene, ["static", "wrist"])
        rendered = oracle.render()
        trace = parse(oracle.write(rendered).text, 2)
        views = label_boxes([view.color for view in rendered], trace)
    for view, boxes in zip(rendered, views, strict=True):
        height, width = view.color.shape[:2]
        assert (width, height) == (640, 480)
        assert not _overlaps(boxes), _overlaps(boxes)
        assert all(b[0] >= 0 and b[1] >= 0 and b[2] <= width and b[3] <= height for _, b in boxes), boxes
    texts = [text for view in views for text, _ in view]
    # The answer's points carry one label each: their ID and their name (shortened at a word).
    assert any(t.startswith("obj_") and t.endswith(" duck") for t in texts), texts
    assert "space_01 free area.." in texts, texts


def test_crowded_labels_do_not_overlap():
    pins = "".join(f'<obj name="o{k}" id="obj_{k:02d}" img_idx="0" point="[{480 + 8 * k}, {500 + 6 * k}]">'
                   for k in range(1, 7))
    trace = parse(f"<think>{pins}</think><answer>obj_01</answer>", 1)
    from robopin.pincot.draw import label_boxes

    (boxes,) = label_boxes([np.zeros((480, 640, 3), np.uint8)], trace)
    assert len(boxes) == 6 and not _overlaps(boxes), boxes


def test_short_label_cuts_at_a_word():
    from robopin.pincot.draw import short_label

    assert short_label("duck") == "duck"
    assert short_label("free area on the red plate") == "free area.."
    assert len(short_label("a" * 40)) == 14
