"""E-TTS selection as pure functions: per-trace normalisation, S = Sc × Ŝa, ε-greedy with threshold η."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.reasoning.tts import TTSConfigError, joint_scores, normalize, select


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("max", [0.25, 1.0, 0.5, 0.0]),
        ("minmax", [0.25, 1.0, 0.5, 0.0]),
        ("sum", [0.2 / 1.4, 0.8 / 1.4, 0.4 / 1.4, 0.0]),
        ("none", [0.2, 0.8, 0.4, 0.0]),
    ],
)
def test_normalize_methods(method, expected):
    assert normalize([0.2, 0.8, 0.4, 0.0], method) == pytest.approx(expected)


def test_minmax_differs_from_max_when_the_worst_is_not_zero():
    assert normalize([0.5, 1.0], "minmax") == pytest.approx([0.0, 1.0])
    assert normalize([0.5, 1.0], "max") == pytest.approx([0.5, 1.0])
    assert normalize([0.3, 0.3], "minmax") == pytest.approx([1.0, 1.0])


@pytest.mark.parametrize("method", ["max", "minmax", "sum"])
def test_all_infeasible_stays_zero(method):
    # A trace whose every action scored 0 must not be lifted to 1 by normalisation.
    assert normalize([0.0, 0.0, 0.0], method) == [0.0, 0.0, 0.0]


def test_normalize_rejects_bad_input():
    with pytest.raises(TTSConfigError, match="softmax"):
        normalize([0.1], "softmax")
    with pytest.raises(ValueError, match="finite and >= 0"):
        normalize([0.1, -0.2])
    assert normalize([]) == []


def test_joint_score_is_the_product():
    assert joint_scores([0.9, 0.9, 0.5], [1.0, 0.5, 1.0]) == pytest.approx([0.9, 0.45, 0.5])
    with pytest.raises(ValueError, match="2 reasoning scores for 1"):
        joint_scores([0.1, 0.2], [1.0])


def test_greedy_takes_the_best_above_threshold():
    selection = select([0.3, 0.7, 0.5], [True, True, True], epsilon=0.0, threshold=0.4, rng=rng())
    assert (selection.mode, selection.index, selection.best_index) == ("greedy", 1, 1)
    assert selection.best_score == pytest.approx(0.7)


def test_threshold_fall_through_rejects_the_batch():
    selection = select([0.3, 0.4, 0.1], [True, True, True], epsilon=0.0, threshold=0.4, rng=rng())
    # S must exceed η: a best pair exactly at the threshold is rejected (eq. 6).
    assert (selection.mode, selection.index, selection.best_index) == ("rejected", None, 1)
    assert not selection.accepted


def test_zero_threshold_accepts_any_best_pair_like_best_of_n():
    selection = select([0.0, 0.0], [True, True], epsilon=0.0, threshold=0.0, rng=rng())
    assert (selection.mode, selection.index) == ("greedy", 0)


def test_ties_go_to_the_earlier_pair():
    selection = select([0.6, 0.6, 0.2], [True, True, True], epsilon=0.0, threshold=0.4, rng=rng())
    assert selection.index == 0


def test_ineligible_pairs_are_never_chosen_not_even_to_explore():
    joint, eligible = [0.9, 0.1, 0.8], [False, True, False]
    for seed in range(50):
        selection = select(joint, eligible, epsilon=1.0, threshold=0.4, rng=rng(seed))
        assert selection.mode == "explore" and selection.index == 1
    greedy = select(joint, eligible, epsilon=0.0, threshold=0.05, rng=rng())
    assert (greedy.index, greedy.best_score) == (1, pytest.approx(0.1))
    none = select([0.9], [False], epsilon=0.5, threshold=0.4, rng=rng())
    assert (none.mode, none.index, none.best_index) == ("no_candidate", None, None)


def test_exploration_keeps_to_the_explorable_pairs_and_else_falls_through_to_greedy():
    joint, eligible = [0.0, 0.9, 0.0], [True, True, True]
    for seed in range(50):
        selection = select(joint, eligible, epsilon=1.0, threshold=0.4, rng=rng(seed), explorable=[False, True, False])
        assert selection.mode == "explore" and selection.index == 1
    none = select([0.0, 0.1], [True, True], epsilon=1.0, threshold=0.4, rng=rng(), explorable=[False, False])
    assert (none.mode, none.index, none.best_index) == ("rejected", None, 1)
    with pytest.raises(ValueError, match="explorable"):
        select([0.1], [True], epsilon=0.1, threshold=0.4, rng=rng(), explorable=[True, False])


def test_epsilon_explores_at_its_rate_with_a_fixed_seed():
    generator = rng(42)
    modes = [
        select([0.1, 0.9, 0.5, 0.2], [True] * 4, epsilon=0.1, threshold=0.4, rng=generator).mode for _ in range(2000)
    ]
    explore = modes.count("explore") / len(modes)
    assert 0.08 <= explore <= 0.12
    assert set(modes) == {"explore", "greedy"}


def test_exploration_picks_uniformly_among_eligible_pairs():
    generator = rng(7)
    picks = [select([0.9, 0.1, 0.1], [True] * 3, epsilon=1.0, threshold=0.4, rng=generator).index for _ in range(900)]
    counts = np.bincount(picks, minlength=3)
    assert counts.min() > 250  # each of the three about 300 times


def test_selection_is_deterministic_for_a_seed():
    def run(seed: int) -> list:
        generator = rng(seed)
        return [
            (s.mode, s.index)
            for s in (
                select([0.5, 0.2, 0.45], [True] * 3, epsilon=0.3, threshold=0.4, rng=generator) for _ in range(20)
            )
        ]

    assert run(3) == run(3)
    assert run(3) != run(4)
