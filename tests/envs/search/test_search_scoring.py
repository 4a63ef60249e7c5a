"""Answer normalisation, exact match and F1 on hand examples; the reward."""

from __future__ import annotations

import pytest

from agentrl.envs.search import normalize_answer
from agentrl.envs.search.scoring import AnswerMetric, exact_match, f1_score, score


def test_normalisation_is_squads() -> None:
    assert normalize_answer("  The Eiffel-Tower! ") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("Theodore") == "theodore"  # "the" only as a word
    assert normalize_answer("") == ""


def test_exact_match_after_normalisation() -> None:
    assert exact_match("the Glimmerwheel.", ["Glimmerwheel"])
    assert exact_match("VELLMORA", ["Quorvex", "Vellmora"])
    assert not exact_match("Vellmora city", ["Vellmora"])
    assert not exact_match("", ["Vellmora"])


def test_f1_on_hand_examples() -> None:
    assert f1_score("Orin Vaskel", ["Orin Vaskel"]) == 1.0
    assert f1_score("Vaskel", ["Orin Vaskel"]) == pytest.approx(2 / 3)  # p=1, r=1/2
    assert f1_score("Orin Drabek Vaskel", ["Orin Vaskel"]) == pytest.approx(0.8)  # p=2/3, r=1
    assert f1_score("the", ["Vaskel"]) == 0.0  # an answer of articles only is empty
    assert f1_score("nothing", ["a", "Vaskel"]) == 0.0
    assert f1_score("x", ["Vaskel", "x"]) == 1.0  # the best gold answer
    assert score("Vaskel", ["Orin Vaskel"], AnswerMetric.EM) == 0.0
    assert score("Vaskel", ["Orin Vaskel"], AnswerMetric.F1) == pytest.approx(2 / 3)
