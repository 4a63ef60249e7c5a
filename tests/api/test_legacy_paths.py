"""Old import paths keep working after the re-layout (modules moved into their rooms).

The lists below were taken before the move: every module path of `src/agentrl` (envs aside,
they did not move) with its `__all__` and the public names tests and benchmarks imported from
it, every name of `agentrl.__all__`, and every `agentrl...` import and dotted reference in
README.md, docs/*.md and examples/ (the notebook included). An old module name must give the
SAME module object as its new home (`agentrl._legacy.MOVED`), so patching it patches the real
module.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

import agentrl
from agentrl._legacy import MOVED


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


PUBLIC_API = _names(
    "AdamParams AdvantageEstimator Advantages ChatRenderer ChatTemplateError CheckpointRef "
    "CommandTool Completion CompletionStop Datum EnvAction EnvGroup EnvGroupFactory EnvStep "
    "EvalConfig EvalOutcome ForwardBackwardResult FunctionEnv FunctionEnvGroup FunctionTool "
    "FunctionTools GroupAdvantages GroupMean GroupNormalized GroupReward HistoryRewriteError "
    "KLEstimator "
    "LeaveOneOut LossConfig LossName LossNormalisation Message ParseError ParseErrorKind "
    "ParsedAction RewardFn RewardOutcome RolloutConfig Sampler SamplingParams StatusTexts "
    "StopReason "
    "TaskInfo TokenCounts ToolArgumentError ToolCall ToolProtocol ToolResult TrainConfig "
    "TrainResult Trainer TrainingBackend Trajectory TrajectoryGroup Turn TurnStatus "
    "WinMinusInvalid __version__ build_datums command_of evaluate evaluate_tasks "
    "function_env_factory model_player parse_tool_call rollout_batch rollout_group tool "
    "trajectory_to_datum "
)
"""`agentrl.__all__` before the re-layout."""

OLD_MODULES: dict[str, str] = {
    "agentrl._optional": "MissingExtraError require",
    "agentrl.advantages": (
        "AdvantageEstimator Advantages GiGPO GroupAdvantages GroupMean GroupNormalized "
        "LeaveOneOut TrajectoryLevelEstimator is_group_local"
    ),
    "agentrl.backends": (
        "AdamParams CheckpointRef ForwardBackwardResult LossConfig LossName Sampler "
        "SamplingParams TrainingBackend pytrio_sdk"
    ),
    "agentrl.backends.base": (
        "AdamParams CheckpointRef ForwardBackwardResult KLEstimator LossConfig LossName "
        "LossNormalisation MaskMode Sampler SamplingParams TrainingBackend"
    ),
    "agentrl.backends.errors": "CheckpointError",
    "agentrl.backends.local": (
        "GenResult LocalBackend LocalSampler LoraSpec PrefixKVCache SamplerStats "
        "qwen3_config select_device"
    ),
    "agentrl.backends.local.backend": "LocalBackend",
    "agentrl.backends.local.behaviour": "TrainerBehaviour trainer_logprobs with_logprobs",
    "agentrl.backends.local.engine": "ModelEngine",
    "agentrl.backends.local.files": (
        "ADAPTER_CONFIG ADAPTER_WEIGHTS AdapterSettings check_adapter_dir "
        "check_safetensors read_json_object"
    ),
    "agentrl.backends.local.generation": "GenRequest GenResult generate",
    "agentrl.backends.local.kvcache": "CacheStats PrefixKVCache",
    "agentrl.backends.local.model": (
        "KV LoraSpec apply_lora cache_kwarg cache_select_rows default_dtype kv_from_cache "
        "kv_to_cache load_causal_lm qwen3_config random_causal_lm select_device"
    ),
    "agentrl.backends.local.sampler": "LocalSampler SamplerStats",
    "agentrl.backends.local.streaming": "LocalGradientStream",
    "agentrl.backends.local.training": (
        "Normalisation batch_totals micro_batches run_forward_backward validate_datums"
    ),
    "agentrl.backends.mismatch": "LogprobMismatch datum_mismatch logprob_mismatch merge_mismatch",
    "agentrl.backends.pytrio": "MaskMode MissingApiKeyError PyTrioBackend RemoteSampler SdkName",
    "agentrl.backends.pytrio_convert": (
        "CLIPPED_LOSSES DatumTooLongError IGNORE_INDEX MaskMode RemoteLimits "
        "UnsupportedLossError check_datums_fit check_remote_loss completion_from_sequence "
        "loss_fn_config to_sdk_adam to_sdk_datum to_sdk_sampling_params"
    ),
    "agentrl.backends.pytrio_sampler": "RemoteSampler check_in_flight",
    "agentrl.backends.pytrio_sdk": (
        "MissingApiKeyError PyTrioSdk RECOVERY_TTL_SECONDS SdkName TinkerSdk is_broken_run sdk_for"
    ),
    "agentrl.backends.streaming": (
        "GradientStream StreamingBackend StreamingUnsupportedError SummedStream "
        "merge_results open_stream"
    ),
    "agentrl.backends.vllm": (
        "AdapterSampler VLLM_LORA_RANKS VllmBackend VllmOptions VllmSampler vllm_lora_rank"
    ),
    "agentrl.chat": (
        "ChatRenderer ChatTemplateError ChatTokenizer HistoryRewriteError message_to_dict"
    ),
    "agentrl.chat.base": "ChatTemplateError ChatTokenizer HistoryRewriteError message_to_dict",
    "agentrl.chat.dialects": (
        "DIALECTS DeepSeekDialect DialectError DialectParse Extracted GlmDialect "
        "HarmonyDialect KimiDialect LlamaJsonDialect QwenJsonDialect QwenXmlDialect "
        "ToolCallDialect detect_dialect dialect_for"
    ),
    "agentrl.chat.dialects.base": (
        "DialectParse Extracted ToolCallDialect arguments_from_json extract_blocks "
        "json_arguments load_json quote"
    ),
    "agentrl.chat.dialects.deepseek": "DeepSeekDialect",
    "agentrl.chat.dialects.glm": "GlmDialect",
    "agentrl.chat.dialects.harmony": "HarmonyDialect",
    "agentrl.chat.dialects.kimi": "KimiDialect",
    "agentrl.chat.dialects.llama": "LlamaJsonDialect",
    "agentrl.chat.dialects.qwen": "QwenJsonDialect QwenXmlDialect",
    "agentrl.chat.encoding": (
        "BoundaryCheck LineEncoder VerifyMode batch_encoder missing_suffix verify_mode"
    ),
    "agentrl.chat.history": (
        "ExtensionMode RenderRecord drop_think_blocks first_difference "
        "structured_messages warn_once"
    ),
    "agentrl.chat.renderer": (
        "ChatRenderer ChatTemplateError ChatTokenizer HistoryRewriteError message_to_dict"
    ),
    "agentrl.checkpoints": (
        "CHECKPOINTS_DIR CheckpointInfo METRICS_FILE ROLLOUTS_FILE RUN_FILE check_run_dir "
        "latest_checkpoint resolve_model_path"
    ),
    "agentrl.cli": "build_parser main",
    "agentrl.cli_args": "ConfigArgumentError add_config_arguments config_from_args flag_name",
    "agentrl.config": (
        "BackendName BehaviourLogprobs CommonConfig EnvEngine EnvName EstimatorName "
        "EvalConfig EvalPolicy EvalSplit RewardName SamplerName StalePolicy SwanLabMode "
        "TrainConfig WandbMode"
    ),
    "agentrl.datums": (
        "Datum PrefixError build_datums has_signal segments trajectory_to_datum "
        "trajectory_to_datums"
    ),
    "agentrl.demo": "DEMO_SIZES DemoReport DemoSize demonstration_datums run_demo warm_start",
    "agentrl.env": (
        "EnvAction EnvGroup EnvGroupFactory EnvStep TaskInfo close_env_factory command_of"
    ),
    "agentrl.envs": "",
    "agentrl.evaluation": (
        "EvalOutcome PlayFn default_label evaluate evaluate_tasks model_player planner_player"
    ),
    "agentrl.interrupts": "HANDLED_SIGNALS run_until_signal",
    "agentrl.learning": (
        "BENCHMARK DEMO EvalPoint LearningResult LearningSetup SMOKE TEST fetch_tokenizer "
        "held_out_success plot_learning run_learning"
    ),
    "agentrl.learning_alfworld": (
        "CPU_SMOKE GPU PRESETS Score ScratchResult ScratchSetup run_scratch"
    ),
    "agentrl.learning_tokenizer": "bpe_tokenizer fetch_tokenizer",
    "agentrl.losses": "LossSums kl_estimate loss_divisor policy_loss_sum",
    "agentrl.metrics": (
        "EpisodeStats OVERALL SplitSummary TokenStats UpdateMetrics by_task_type "
        "episode_stats eval_summaries split_summary to_json_value update_metrics"
    ),
    "agentrl.pipeline": "GroupHook GroupSource Rollout RolloutFn UpdateGroups extra_batch",
    "agentrl.preflight": "TokenBudgetError check_token_budget first_prompt_length",
    "agentrl.recipe": (
        "PYCODE_COUNTS TINY_MODEL TINY_MODEL_SEED TOY_SEEDS TOY_TRAIN_GAMES "
        "check_credentials env_factory_for eval_sampler_for local_backend_for "
        "renderer_for rollout_config_for tasks_for tokenizer_for tool_protocol_for "
        "training_backend_for"
    ),
    "agentrl.records": (
        "MessageRecord RecordFileError SCHEMA_VERSION TokenRecord TrajectoryRecord "
        "TurnRecord append_records read_records"
    ),
    "agentrl.registry": (
        "ESTIMATORS EstimatorOptions REWARDS RewardOptions make_estimator make_reward"
    ),
    "agentrl.reporting": (
        "Column ConsoleSink EpisodeEntry EvalFile JsonlError JsonlSink JsonlWriter "
        "MetricSink MultiSink Reportable SUMMARY_COLUMNS TRAIN_COLUMNS WriteMode "
        "episode_id episode_record format_table make_sinks read_eval_file read_jsonl "
        "run_record summary_record tracker_sinks"
    ),
    "agentrl.reporting.jsonl": (
        "JsonlError JsonlWriter WriteMode drop_records named_os_error read_jsonl"
    ),
    "agentrl.reporting.lock": "OutputInUseError OutputLock check_not_in_use lock_path",
    "agentrl.reporting.plots": "PlotError RunPoint plot_eval_files plot_runs run_points",
    "agentrl.reporting.records": (
        "EpisodeEntry EvalFile RECORD_VERSION episode_id episode_record read_eval_file "
        "run_record summaries_in_order summary_record"
    ),
    "agentrl.reporting.sinks": (
        "Column ConsoleSink JsonlSink MetricSink MultiSink Reportable SUMMARY_COLUMNS "
        "TRAIN_COLUMNS TrackerRunSink format_table make_sinks tracker_sinks"
    ),
    "agentrl.reporting.swanlab": "SwanLabError SwanLabSink has_credentials",
    "agentrl.reporting.viewer": "render_html viewer_data write_viewer",
    "agentrl.reporting.wandb": "WandbError WandbSink has_credentials",
    "agentrl.resume": (
        "ORDER_FIELDS check_same_run drop_unsaved_records load_latest read_run_file write_run_file"
    ),
    "agentrl.rewards": "RewardFn WinMinusInvalid",
    "agentrl.rollout": "RolloutConfig SamplerFailure rollout_batch rollout_group",
    "agentrl.streaming": "GroupStreamer StreamedBatch check_streaming",
    "agentrl.testing": (
        "EnvCheckError EnvCheckReport PolicySampler SampleCall ScriptItem ScriptedSampler "
        "TextTokenizer check_env_group synthetic_group synthetic_logprobs "
        "synthetic_trajectory"
    ),
    "agentrl.testing.env_check": "check_env_group",
    "agentrl.testing.samplers": "",
    "agentrl.testing.signal": "HashReward",
    "agentrl.testing.synthetic": "",
    "agentrl.tokenizer": (
        "QWEN_CHAT_TEMPLATE QWEN_PRETOKENIZE_PATTERN QWEN_SPECIAL_TOKENS QwenAddedToken "
        "add_template_tokens build_qwen_tokenizer default_cache_dir load_tokenizer "
        "qwen_tiktoken_path"
    ),
    "agentrl.tokens": "TokenBuffer TokenPrefix Tokens",
    "agentrl.tool_calls": (
        "check_command_call json_tool_call normalize_action parse_tool_call xml_tool_call"
    ),
    "agentrl.tools": (
        "CallChecker CallsChecker CommandTool FunctionEnv FunctionEnvGroup FunctionTool "
        "FunctionTools StatusTexts ToolArgumentError ToolProtocol ToolResult "
        "function_env_factory parse_with_dialect tool tool_messages"
    ),
    "agentrl.tools.command": "CommandTool StatusTexts",
    "agentrl.tools.functions": "FunctionTool ToolArgumentError tool",
    "agentrl.tools.group": "FunctionEnv FunctionEnvGroup function_env_factory",
    "agentrl.tools.protocol": (
        "CallChecker CallsChecker ToolProtocol ToolResult parse_with_dialect tool_messages"
    ),
    "agentrl.tools.toolset": "FunctionTools",
    "agentrl.trainer": "ORDER_FIELDS TrainResult Trainer task_batch",
    "agentrl.types": (
        "Completion CompletionStop CutReply EnvAction EnvStep Message ParseErrorKind "
        "ParsedAction StepCounting StopReason TaskInfo TokenCounts ToolCall Trajectory "
        "TrajectoryGroup Turn TurnStatus"
    ),
}
"""Every module path of `agentrl` before the re-layout -> the public names it offered."""

DOC_IMPORTS: dict[str, str] = {
    "agentrl": (
        "AdamParams ChatRenderer EvalConfig FunctionEnv GroupMean LeaveOneOut LossConfig "
        "LossName RolloutConfig TaskInfo ToolCall TrainConfig Trainer TrajectoryGroup "
        "WinMinusInvalid build_datums evaluate evaluate_tasks function_env_factory "
        "model_player rollout_batch rollout_group tool"
    ),
    "agentrl.advantages": "TrajectoryLevelEstimator",
    "agentrl.backends.base": "AdamParams LossConfig LossName",
    "agentrl.backends.local": "LocalBackend LoraSpec",
    "agentrl.backends.local.behaviour": "trainer_logprobs with_logprobs",
    "agentrl.backends.pytrio": "PyTrioBackend",
    "agentrl.datums": "trajectory_to_datum",
    "agentrl.demo": "demonstration_datums warm_start",
    "agentrl.envs.alfworld": (
        "AlfworldEnvGroup AlfworldEnvOptions PlannerPolicy alfworld_group_factory "
        "batch_at count_games find_games generate_games make_alfworld_group play_group "
        "play_tasks"
    ),
    "agentrl.envs.alfworld.explorer": "explorer_action explorer_policy parse_goal",
    "agentrl.envs.alfworld.fast": "FastAlfworldEngine",
    "agentrl.envs.alfworld.tools": "alfworld_tool_protocol",
    "agentrl.envs.pycode": "SandboxLimits run_sandboxed",
    "agentrl.envs.toy": "ToyEnvGroup make_toy_group toy_task toy_tasks toy_tool_protocol",
    "agentrl.records": "TrajectoryRecord append_records read_records",
    "agentrl.reporting": "format_table read_eval_file",
    "agentrl.testing": "PolicySampler ScriptedSampler check_env_group synthetic_trajectory",
    "agentrl.tokenizer": "build_qwen_tokenizer",
    "agentrl.tools": "CommandTool StatusTexts",
    "agentrl.types": "TurnStatus",
}
"""`from MODULE import NAMES` / `import MODULE` in README.md, docs/ and examples/."""

DOC_REFERENCES = (
    "agentrl.Trainer",
    "agentrl._optional.require",
    "agentrl.advantages",
    "agentrl.advantages.is_group_local",
    "agentrl.backends",
    "agentrl.backends.base",
    "agentrl.backends.local",
    "agentrl.backends.local.behaviour",
    "agentrl.backends.mismatch",
    "agentrl.backends.pytrio",
    "agentrl.backends.pytrio_sdk",
    "agentrl.backends.streaming",
    "agentrl.backends.vllm",
    "agentrl.chat",
    "agentrl.chat.dialects",
    "agentrl.chat.encoding.LineEncoder",
    "agentrl.cli_args",
    "agentrl.command_of",
    "agentrl.config.EvalConfig",
    "agentrl.config.TrainConfig",
    "agentrl.datums",
    "agentrl.demo",
    "agentrl.env",
    "agentrl.envs.alfworld",
    "agentrl.envs.alfworld.EnvWorkerPool",
    "agentrl.envs.alfworld.apply_textworld_compat",
    "agentrl.envs.alfworld.engine.AlfworldEngine",
    "agentrl.envs.alfworld.expert",
    "agentrl.envs.alfworld.explorer",
    "agentrl.envs.alfworld.fast",
    "agentrl.envs.alfworld.fast.TextWorldBranch",
    "agentrl.envs.alfworld.fast.lockstep",
    "agentrl.envs.alfworld.tools",
    "agentrl.envs.pycode",
    "agentrl.envs.pycode.run_sandboxed",
    "agentrl.envs.pycode.solver",
    "agentrl.envs.toy",
    "agentrl.envs.toy.fetch",
    "agentrl.evaluate",
    "agentrl.evaluate_tasks",
    "agentrl.learning",
    "agentrl.learning.DEMO",
    "agentrl.learning.TEST",
    "agentrl.learning.run_learning",
    "agentrl.learning_alfworld.run_scratch",
    "agentrl.learning_tokenizer.bpe_tokenizer",
    "agentrl.learning_tokenizer.fetch_tokenizer",
    "agentrl.losses",
    "agentrl.metrics",
    "agentrl.pipeline",
    "agentrl.records",
    "agentrl.records.TrajectoryRecord",
    "agentrl.registry",
    "agentrl.reporting",
    "agentrl.reporting.jsonl.JsonlWriter",
    "agentrl.reporting.plots.plot_eval_files",
    "agentrl.reporting.sinks",
    "agentrl.reporting.viewer.write_viewer",
    "agentrl.rewards",
    "agentrl.rollout",
    "agentrl.streaming",
    "agentrl.testing",
    "agentrl.testing.check_env_group",
    "agentrl.testing.synthetic_group",
    "agentrl.testing.synthetic_trajectory",
    "agentrl.tokenizer",
    "agentrl.tokenizer.QWEN_CHAT_TEMPLATE",
    "agentrl.tokenizer.add_template_tokens",
    "agentrl.tokenizer.build_qwen_tokenizer",
    "agentrl.tokenizer.load_tokenizer",
    "agentrl.tool_calls",
    "agentrl.tool_calls.parse_tool_call",
    "agentrl.tools",
    "agentrl.tools.CommandTool",
    "agentrl.tools.FunctionTools",
    "agentrl.trainer",
    "agentrl.types",
)
"""Dotted `agentrl...` references (modules or module attributes) in README.md, docs/ and
examples/."""

RENAMED = {
    "agentrl.testing.signal.noisy_toy_policy": "agentrl.envs.toy.policies.noisy_toy_policy",
}
"""Names that left their module on purpose (the testing room imports no env) -> where they are."""

OPTIONAL = ("torch", "transformers", "peft", "vllm", "pytrio", "tinker", "swanlab", "wandb")
"""Third-party packages an old module may need (a missing one skips its check)."""


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # MissingExtraError is an ImportError too
        missing = getattr(exc, "name", None) or ""
        text = str(exc)
        if missing.split(".")[0] in OPTIONAL or any(f"'{p}'" in text for p in OPTIONAL):
            pytest.skip(f"{name} needs an optional package: {exc}")
        raise


def _has(module: ModuleType, name: str) -> bool:
    """What `from module import name` finds: an attribute, else a submodule."""
    if hasattr(module, name):
        return True
    try:
        _import(f"{module.__name__}.{name}")
    except ModuleNotFoundError:
        return False
    return True


def test_public_api_is_unchanged() -> None:
    assert sorted(agentrl.__all__) == sorted(PUBLIC_API)
    for name in PUBLIC_API:
        assert getattr(agentrl, name) is not None, name


@pytest.mark.parametrize("module", sorted(OLD_MODULES))
def test_old_module_path_imports(module: str) -> None:
    imported = _import(module)
    missing = [n for n in OLD_MODULES[module].split() if not _has(imported, n)]
    assert not missing, f"{module} lost {missing}"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_name_is_the_new_module(old: str) -> None:
    module = _import(old)
    new = importlib.import_module(MOVED[old])
    assert module is new
    assert sys.modules[old] is new
    assert new.__spec__ is not None and new.__spec__.name == MOVED[old]
    parent, _, leaf = old.rpartition(".")
    assert getattr(importlib.import_module(parent), leaf) is new  # `from parent import leaf`


def test_every_moved_module_is_listed() -> None:
    assert set(MOVED) <= set(OLD_MODULES)
    assert not set(MOVED.values()) & set(MOVED), "a new name must not be an old one"


def test_patching_an_old_path_patches_the_real_module(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentrl.training.trainer

    sentinel = object()
    monkeypatch.setattr("agentrl.trainer.log", sentinel)
    assert agentrl.training.trainer.log is sentinel
    from agentrl import trainer

    assert trainer is agentrl.training.trainer


@pytest.mark.parametrize("module", sorted(DOC_IMPORTS))
def test_documented_imports(module: str) -> None:
    imported = _import(module)
    for name in DOC_IMPORTS[module].split():
        assert _has(imported, name), f"from {module} import {name}"


@pytest.mark.parametrize("reference", DOC_REFERENCES)
def test_documented_references(reference: str) -> None:
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = _import(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return
    raise AssertionError(f"{reference} does not resolve")


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_renamed_names(old: str) -> None:
    module, _, name = RENAMED[old].rpartition(".")
    assert _has(_import(module), name)
    old_module, _, old_name = old.rpartition(".")
    assert not hasattr(_import(old_module), old_name)


def test_old_paths_in_a_fresh_interpreter() -> None:
    code = (
        "import agentrl.backends.errors, agentrl.trainer\n"
        "from agentrl.trainer import Trainer\n"
        "from agentrl import recipe, records\n"
        "from agentrl.tokenizer import build_qwen_tokenizer\n"
        "import agentrl.training.trainer as new\n"
        "import sys\n"
        "assert sys.modules['agentrl.trainer'] is new and Trainer is new.Trainer\n"
        "assert records is sys.modules['agentrl.store.records']\n"
        "assert recipe is sys.modules['agentrl.training.recipe']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
