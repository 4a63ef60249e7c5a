"""Train an agent written without agentrl: plain `openai` client code, trained unchanged.

`agent` below is an ordinary tool-using agent: it sends its history to an OpenAI-compatible
endpoint, runs the `calculator` tool it defines itself when the model calls it, and returns a
reward. It imports nothing from agentrl. agentrl serves the model through its gateway (one
session per episode, exact tokens and logprobs recorded), runs K copies of the agent per task
and trains on the trajectories with the usual Trainer (groups, advantages, PPO, checkpoints).

Here the model is the tiny random-initialised model of the local backend (torch, CPU), trained
for 2 updates: it cannot do arithmetic, so the reward is shaped (a right answer 1, else minus
the answer's length) to give its groups a signal. The same code trains a real model with
`--base-model PATH` on a GPU, or from the command line:

    agentrl train --env agent --agent examples/05_train_an_existing_agent.py:agent \\
        --base-model tiny --backend local --device cpu --max-steps 2 --group-size 4 \\
        --games-per-batch 2 --max-assistant-tokens 24 --max-trajectory-tokens 2000

Run: python examples/05_train_an_existing_agent.py
"""

import ast
import asyncio
import json
import operator
import os
import shutil
from pathlib import Path

from openai import AsyncOpenAI

TASKS = ["What is 17 + 25?", "What is 6 * 7?", "What is 90 - 48?", "What is 84 / 2?"]
"""The tasks `agentrl train --env agent` reads (each a `train` task whose description is it)."""

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 2 + 3 * 4"}},
            "required": ["expression"],
        },
    },
}
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
_OPERATORS[ast.Div] = operator.truediv


def calculator(expression: str) -> str:
    """The agent's own tool: +, -, *, / on numbers."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError("only numbers and + - * /")

    try:
        return f"{value(ast.parse(expression, mode='eval').body):g}"
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        return f"error: {exc}"


async def agent(endpoint, task) -> float:
    """One episode: ask, run the calculator when the model calls it, return the reward."""
    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    messages = [
        {"role": "system", "content": "Answer with a number. Use the calculator tool."},
        {"role": "user", "content": task.description},
    ]
    answer = ""
    async with client:
        for _ in range(3):
            response = await client.chat.completions.create(
                model=endpoint.model, messages=messages, tools=[CALCULATOR]
            )
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                answer = message.content or ""
                break
            for call in message.tool_calls:
                try:
                    expression = json.loads(call.function.arguments).get("expression", "")
                except json.JSONDecodeError:
                    expression = ""
                result = calculator(str(expression))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    question = task.description.removeprefix("What is ").rstrip("?")
    if calculator(question) in answer.split():
        return 1.0
    return -min(1.0, len(answer) / 400)  # shaped: a shorter wrong answer is less wrong


async def main() -> None:
    # agentrl's side: the model, the gateway it is served through, the agent player, a Trainer.
    from agentrl import TrainConfig
    from agentrl.backends.local import LocalBackend, LoraSpec
    from agentrl.chat.tokenizers import build_qwen_tokenizer
    from agentrl.core.types import TaskInfo
    from agentrl.recipes.agent import agent_trainer

    out = Path(os.environ.get("AGENTRL_EXAMPLE_OUT", "runs/examples")) / "05_existing_agent"
    shutil.rmtree(out, ignore_errors=True)  # a fresh run each time
    tokenizer = build_qwen_tokenizer()
    backend = LocalBackend.tiny(
        tokenizer, seed=0, lora=LoraSpec(rank=8), checkpoint_dir=out / "checkpoints"
    )
    config = TrainConfig(
        base_model="tiny",
        backend="local",
        env="agent",
        max_steps=2,
        games_per_batch=2,
        group_size=4,
        max_assistant_tokens=24,
        max_trajectory_tokens=2_000,
        temperature=1.0,
        learning_rate=1e-4,
        save_every=2,
        run_dir=out,
    )
    tasks = [TaskInfo(task_id=f"task-{i}", description=text) for i, text in enumerate(TASKS)]
    # the gateway on a free loopback port, K copies of the agent per task, the usual Trainer
    async with agent_trainer(
        agent, tasks, config=config, backend=backend, tokenizer=tokenizer, progress=False
    ) as run:
        result = await run.trainer.run()
    gateway = run.gateway
    for m in result.metrics:
        loss = "-" if m.loss is None else f"{m.loss:+.4f}"
        print(
            f"update {m.update}: reward {m.stats.reward_mean:+.3f}, turns "
            f"{m.stats.mean_turns:.1f}, trained {m.trained_trajectories}/{m.stats.episodes} "
            f"trajectories, loss {loss}"
        )
    print(f"gateway: {gateway.stats.calls} calls, errors {dict(gateway.stats.errors) or 'none'}")
    print("checkpoint:", result.checkpoints[-1].sampler_path)


if __name__ == "__main__":
    asyncio.run(main())
