"""Checks that any implementation of agentrl's contracts must pass.

`check_env_group` drives a fresh `EnvGroup` through its contract: identical initial state
across branches, result shapes, `None` leaving a branch unchanged, finished branches staying
finished, and an idempotent `close()`. Use it in your own tests::

    report = asyncio.run(check_env_group(lambda: MyEnvGroup(task, 4)))

`ScriptedSampler` (one script of replies per branch) and `PolicySampler` (replies from a
function of the prompt text) are `Sampler`s without a model: they tokenize text replies with a
real tokenizer, append the stop token, cut at `max_tokens`, give deterministic logprobs and can
simulate a prefix cache (reporting `Completion.prefill_tokens`). `RecordingBackend` keeps
the datums a real backend was asked to train (`same_datums` compares two runs').
"""

from agentrl.testing.env_check import EnvCheckError, EnvCheckReport, check_env_group
from agentrl.testing.recording import RecordingBackend, same_datums
from agentrl.testing.samplers import (
    KeyedPolicySampler,
    PolicySampler,
    SampleCall,
    ScriptedSampler,
    ScriptItem,
    TextTokenizer,
    synthetic_logprobs,
)
from agentrl.testing.synthetic import synthetic_group, synthetic_trajectory

__all__ = [
    "EnvCheckError",
    "EnvCheckReport",
    "KeyedPolicySampler",
    "PolicySampler",
    "RecordingBackend",
    "SampleCall",
    "ScriptItem",
    "ScriptedSampler",
    "TextTokenizer",
    "check_env_group",
    "same_datums",
    "synthetic_group",
    "synthetic_logprobs",
    "synthetic_trajectory",
]
