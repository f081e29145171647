"""The simulator as the loop's ground truth: pin, answer and plan accuracy of real oracle and erring-model text.

The oracle's own traces pin every entity on the object it names (R_pin 1) and answer the right pick and
place; the imperfect backend with one error forced (rate 1) loses exactly what that error breaks. The
reference plan of the long-horizon task comes from its goals and the shipped action dictionary.
"""

from __future__ import annotations

import numpy as np
import pytest

from robopin.pincot import parse
from robopin.pincot.prompts import pointing_prompt
from robopin.reasoning.errors import ReasoningConfigError
from robopin.reasoning.ground_truth import make_ground_truth, plan_measures, pointing_measures
from robopin.reasoning.protocols import Observation
from robopin.sim.tasks import build_scene
from robopin.system import load_system
from robopin.vlm import build_messages, make_backend
from robopin.vlm.base import SamplingParams, ViewImage

from .helpers import unique_world_name

VIEWS = ("static", "wrist")


@pytest.fixture(scope="module")
def scene():
    scene = build_scene("multi_view", 3, world_name=unique_world_name("truth"))
    yield scene
    scene.close()


def _observation():
    return Observation(tuple(ViewImage(np.zeros((480, 640, 3), np.uint8), n, k) for k, n in enumerate(VIEWS)), 0.0)


def _trace(scene, **rates):
    backend = make_backend({"type": "oracle", "world": scene.world.name, "views": list(VIEWS),
                            "preset": "oracle", "rates": rates})
    messages = build_messages(pointing_prompt(scene.task.instruction, list(VIEWS)), list(_observation().views))
    text = backend.generate(messages, SamplingParams()).texts[0]
    return parse(text, len(VIEWS))


def test_the_oracles_trace_is_fully_accurate(scene):
    truth = make_ground_truth({"type": "sim", "world": scene.world.name})
    regions = truth.regions(_observation(), scene.task.instruction)
    assert regions is not None and regions.pick and regions.place
    measures = pointing_measures(_trace(scene), regions)
    assert measures == {"pin_accuracy": 1.0, "answer_accuracy": 1.0}


def test_an_anchor_on_another_object_lowers_pin_accuracy(scene):
    truth = make_ground_truth({"type": "sim", "world": scene.world.name})
    regions = truth.regions(_observation(), scene.task.instruction)
    measures = pointing_measures(_trace(scene, anchor_error=1.0, answer_error_faulty_anchor=0.0), regions)
    assert measures["pin_accuracy"] < 1.0
    assert measures["answer_accuracy"] == 1.0  # the answer's own points were left alone


def test_a_wrong_target_lowers_answer_accuracy(scene):
    truth = make_ground_truth({"type": "sim", "world": scene.world.name})
    regions = truth.regions(_observation(), scene.task.instruction)
    measures = pointing_measures(_trace(scene, answer_error_correct_anchors=1.0), regions)
    assert measures["answer_accuracy"] < 1.0


def test_an_instruction_the_scene_cannot_ground_has_no_goal_regions(scene):
    truth = make_ground_truth({"type": "sim", "world": scene.world.name})
    regions = truth.regions(_observation(), "put the banana on the green plate")
    assert regions is not None and not regions.pick and not regions.place


def test_the_long_horizon_reference_plan_uses_the_shipped_action_dictionary():
    actions = load_system("config/sim_xarm6.yaml").node("task_node").parameters["reasoning"]["actions"]
    actions = {int(k): v for k, v in actions.items()}
    scene = build_scene("long_horizon", 0, world_name=unique_world_name("truth-lh"), robot="xarm6")
    try:
        truth = make_ground_truth({"type": "sim", "world": scene.world.name})
        reference = truth.reference_plan(scene.task.instruction, actions)
        assert reference is not None and len(reference) == len(scene.task.goals)
        assert set(reference) <= set(actions.values())
        assert plan_measures(reference, reference) == {"plan_accuracy": 1.0}
        assert plan_measures(reference[:1], reference)["plan_accuracy"] == pytest.approx(1 / len(reference))
    finally:
        scene.close()


def test_an_unknown_setting_is_named():
    with pytest.raises(ReasoningConfigError, match="unknown setting"):
        make_ground_truth({"type": "sim", "wrld": "workcell"})
    assert make_ground_truth({}) is None


def test_each_objects_region_is_the_bounding_box_of_its_rendered_mask(scene):
    # The one-pass boxes against each object's mask taken from a full render of both views.
    from robopin.pincot.coords import pixel_index_to_normalized
    from robopin.sim.ground_truth import _body_boxes

    for index, view in enumerate(VIEWS):
        rendered = scene.world.render(view).segmentation
        segmentation = scene.world.segmentation(view)
        np.testing.assert_array_equal(segmentation, rendered)
        boxes = _body_boxes(segmentation, index, 40)
        seen = 0
        for obj in scene.world.objects.values():
            rows, cols = np.nonzero(rendered == obj.body_id)
            if len(rows) < 40:
                assert obj.body_id not in boxes
                continue
            seen += 1
            x0, y0 = pixel_index_to_normalized(int(cols.min()), int(rows.min()), (640, 480))
            x1, y1 = pixel_index_to_normalized(int(cols.max()), int(rows.max()), (640, 480))
            box = boxes[obj.body_id]
            assert (box.x_min, box.y_min, box.x_max, box.y_max) == pytest.approx(
                (max(x0 - 0.5, 0), max(y0 - 0.5, 0), min(x1 + 0.5, 1000), min(y1 + 0.5, 1000)))
            assert box.img_idx == index
        assert seen >= 1, f"no object visible in {view}"
