"""`EnvSpec.baselines`: several scripted baselines per env, the one-`baseline` form kept."""

from __future__ import annotations

import dataclasses

import pytest

from agentrl.config.envspec import Baseline, EnvSpec
from agentrl.config.plugins import env_spec
from agentrl.envs.search.spec import SPEC


def test_search_offers_two_baselines_and_the_first_is_the_baseline() -> None:
    assert SPEC.policies == ("solver", "nosearch")
    assert SPEC.baseline is SPEC.baselines[0] and SPEC.baseline_for("nosearch") is SPEC.baselines[1]
    assert SPEC.baseline_for("planner") is None
    assert env_spec("search") is SPEC


def test_a_spec_with_one_baseline_lists_it_and_names_must_differ() -> None:
    pycode = env_spec("pycode")
    assert pycode.baseline is not None and pycode.baselines == (pycode.baseline,)
    assert pycode.policies == ("solver",) and env_spec("toy").baselines == ()
    extra = Baseline(policy="lazy", plays="pycode tasks", player=SPEC.baselines[0].player)
    both = dataclasses.replace(pycode, baselines=(extra,))
    assert both.policies == ("solver", "lazy") and both.baseline is pycode.baseline
    with pytest.raises(ValueError, match="two baselines named solver"):
        dataclasses.replace(pycode, baselines=(SPEC.baselines[0],))
    assert isinstance(dataclasses.replace(pycode, baseline=None, baselines=()), EnvSpec)
