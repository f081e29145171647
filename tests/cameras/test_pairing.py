"""StampPairer: the one stamp pairing of a camera's streams (snapshot color+depth, projection depth+info+color)."""

from __future__ import annotations

import pytest

from robopin.cameras.pairing import StampPairer


def test_each_lead_pairs_with_the_nearest_partner_within_tolerance_whichever_arrives_first():
    pairer = StampPairer("depth", ["color"], tolerance_s=0.005)
    assert pairer.add("color", 1.000, "c1") == []
    [group] = pairer.add("depth", 1.002, "d1")  # partner first, lead second
    assert (group.stamp_s, group.items) == (1.002, {"depth": "d1", "color": "c1"})
    assert pairer.add("depth", 1.033, "d2") == []  # lead first: waits for its partner
    assert pairer.add("color", 1.050, "c3") == []  # 17 ms away: not its partner
    [group] = pairer.add("color", 1.034, "c2")
    assert group.items == {"depth": "d2", "color": "c2"}


def test_partners_serve_many_leads_and_every_partner_kind_is_required():
    pairer = StampPairer("depth", ["info", "depth_info"], tolerance_s=0.02)
    pairer.add("info", 2.0, "info")
    assert pairer.add("depth", 2.01, "d1") == []  # no depth_info yet
    [first] = pairer.add("depth_info", 2.0, "dinfo")
    [second] = pairer.add("depth", 2.015, "d2")  # the same camera infos again
    assert first.items["depth"] == "d1" and second.items == {"depth": "d2", "info": "info", "depth_info": "dinfo"}


def test_without_partners_every_lead_is_a_group_and_waiting_items_are_bounded():
    assert [g.items for g in StampPairer("color", [], 0.005).add("color", 3.0, "c")] == [{"color": "c"}]
    pairer = StampPairer("depth", ["color"], tolerance_s=0.001, keep=3)
    for k in range(5):
        pairer.add("depth", float(k), f"d{k}")
    assert pairer.add("color", 0.0, "c0") == []  # d0 was pushed out by newer depth frames
    assert [g.items["depth"] for g in pairer.add("color", 4.0, "c4")] == ["d4"]


def test_unknown_kinds_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown stream kind 'depth_info'"):
        StampPairer("depth", ["info"], 0.01).add("depth_info", 0.0, object())
    with pytest.raises(ValueError, match="also a partner"):
        StampPairer("depth", ["depth"], 0.01)
