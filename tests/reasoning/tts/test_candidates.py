"""Action candidates of a trace: depth segments on synthetic depth, and the N pick/place variants."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.reasoning import interpret_pointing
from robopin.reasoning.tts import ActionSamplingConfig, action_candidates, depth_segment
from robopin.reasoning.tts.candidates import DepthView, SegmentCache
from tests.reasoning.tts.helpers import CAMERA, depth_image, tabletop, trace

CUP = (200, 150, 260, 210, 0.05)


def view(*boxes, holes=()) -> DepthView:
    return DepthView(depth_image(boxes, holes), CAMERA)


def test_segment_of_a_block_is_its_pixels_with_the_centre_in_the_middle():
    segment = depth_segment(view(CUP), 231.5, 181.5)
    assert segment is not None
    assert len(segment.pixels_u) == pytest.approx(60 * 60, rel=0.08)  # border pixels sit on the depth step
    assert abs(segment.centre_u - 230) <= 1.5 and abs(segment.centre_v - 180) <= 1.5
    assert segment.height_m == pytest.approx(0.05, abs=0.005)
    assert segment.contains(231.5, 181.5) and not segment.contains(300.5, 300.5)
    assert segment.interior.sum() < len(segment.pixels_u)


def test_a_point_near_the_edge_of_a_large_object_still_finds_its_centre():
    big = (180, 130, 280, 230, 0.04)  # 10 cm: from its corner the first window cuts it
    segment = depth_segment(view(big), 182.5, 132.5)
    assert segment is not None and abs(segment.centre_u - 230) <= 2 and abs(segment.centre_v - 180) <= 2


def test_a_point_on_the_table_or_a_hole_has_no_segment():
    assert depth_segment(view(CUP), 400.5, 400.5) is None
    assert depth_segment(view(CUP, holes=[(220, 170, 245, 195)]), 231.5, 181.5) is None
    assert depth_segment(view(CUP), -3.0, 10.0) is None


def test_overlapping_objects_at_different_depths_are_split():
    front = (240, 160, 300, 220, 0.12)  # in the image it touches the cup, but stands 7 cm higher
    segment = depth_segment(view(CUP, front), 210.5, 160.5)
    assert segment is not None
    in_front = (segment.pixels_u >= 240) & (segment.pixels_v >= 160)
    assert not in_front.any()  # none of the taller block's pixels
    assert segment.pixels_u.max() > 250  # but the cup's strip visible above it
    taller = depth_segment(view(CUP, front), 290.5, 210.5)
    assert taller is not None and taller.pixels_u.min() >= 239 and taller.pixels_v.min() >= 159


def candidates_for(text, observation, count=8, sources=None):
    decision = interpret_pointing(text, observation)
    assert decision.valid, decision.refusal
    config = ActionSamplingConfig(sources=sources) if sources else ActionSamplingConfig()
    return action_candidates(
        0,
        decision,
        observation,
        count=count,
        config=config,
        segments=SegmentCache(observation, config),
        rng=np.random.default_rng(0),
    )


def test_candidates_in_order_as_written_other_view_centre_samples():
    observation = tabletop([CUP], views=2)
    text = trace((205, 155), (500, 350), extra_pick_views={1: (240, 190)})
    candidates = candidates_for(text, observation, count=6)
    assert [c.source for c in candidates] == [
        "as_written",
        "other_view",
        "segment_centre",
        "segment_centre",
        "segment_sample",
        "segment_sample",
    ]
    assert candidates[0].pick.u == pytest.approx(205, abs=1) and candidates[1].pick.img_idx == 1
    assert all(c.action_index == k for k, c in enumerate(candidates))
    keys = {(c.pick.img_idx, round(c.pick.u), round(c.pick.v), round(c.place.u)) for c in candidates}
    assert len(keys) == len(candidates)  # no duplicates
    for c in candidates[4:]:
        assert 200 <= c.pick.u < 260 and 150 <= c.pick.v < 210  # samples inside the object
    # The support (other-view pins of the chosen IDs) follows the chosen pick's view.
    assert [s.img_idx for s in candidates[0].support] == [1]
    assert [s.img_idx for s in candidates[1].support] == [0]


def test_count_and_sources_limit_the_candidates():
    observation = tabletop([CUP], views=2)
    text = trace((205, 155), (500, 350), extra_pick_views={1: (240, 190)})
    assert [c.source for c in candidates_for(text, observation, count=1)] == ["as_written"]
    only_centre = candidates_for(text, observation, count=5, sources=["as_written", "segment_centre"])
    assert [c.source for c in only_centre] == ["as_written", "segment_centre"]


def test_a_decision_without_points_has_one_action():
    observation = tabletop([CUP])
    done = interpret_pointing("<think>All objects are placed.</think><answer>done</answer>", observation)
    assert done.valid and done.done
    (only,) = action_candidates(
        3, done, observation, count=4, config=ActionSamplingConfig(), segments=None, rng=np.random.default_rng(0)
    )
    assert (only.trace_index, only.pick, only.place, only.source) == (3, None, None, "as_written")
